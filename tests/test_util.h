#pragma once
// Helpers for tests: fresh random inputs (their seeds printed when a test
// fails, replayed by FATHOM_TEST_SEED) and relative-error measures.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "io/model_config.h"
#include "kv/kv_scheme.h"
#include "model/model.h"

namespace fathom::testing {

// The seed FATHOM_TEST_SEED names (decimal), or none when it is unset or
// empty. A value that is not a 64-bit decimal number is an error naming it.
inline std::optional<uint64_t> replayed_seed() {
  const char* s = std::getenv("FATHOM_TEST_SEED");
  if (s == nullptr || *s == '\0') return std::nullopt;
  uint64_t seed = 0;
  const char* end = s + std::strlen(s);
  const auto [at, error] = std::from_chars(s, end, seed);
  check(error == std::errc() && at == end, "FATHOM_TEST_SEED: '", s, "' is not a 64-bit decimal seed");
  return seed;
}

// The seeds fresh_rng drew in the running test, in order.
struct SeedLog {
  std::mutex mutex;
  std::vector<uint64_t> seeds;
};
inline SeedLog& seed_log() {
  static SeedLog log;
  return log;
}
inline std::vector<uint64_t> seeds_drawn() {
  std::lock_guard lock(seed_log().mutex);
  return seed_log().seeds;
}

// A generator seeded freshly for every test. Its seed is printed if the
// test fails (SeedReport, below), wherever the generator was drawn, and
// FATHOM_TEST_SEED=<the seed> seeds every generator of the run with it (for
// a test that took one seed, the draws it failed on).
inline std::mt19937_64 fresh_rng(uint64_t* seed_out = nullptr) {
  const uint64_t seed =
      replayed_seed().value_or((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}());
  if (seed_out) *seed_out = seed;
  {
    std::lock_guard lock(seed_log().mutex);
    seed_log().seeds.push_back(seed);
  }
  return std::mt19937_64(seed);
}

// What a failed test prints of its seeds: none when it drew none.
inline std::string seed_report(const std::vector<uint64_t>& seeds) {
  if (seeds.empty()) return "";
  std::string s = "seeds this test drew:";
  for (uint64_t seed : seeds) s += " " + std::to_string(seed);
  return s + " (FATHOM_TEST_SEED=" + std::to_string(seeds.front()) + " gives every generator the first)";
}

// Empties the seeds as each test starts and prints them after one that failed.
class SeedReport : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override {
    std::lock_guard lock(seed_log().mutex);
    seed_log().seeds.clear();
  }
  void OnTestEnd(const ::testing::TestInfo& test) override {
    if (!test.result()->Failed()) return;
    if (const std::string report = seed_report(seeds_drawn()); !report.empty()) std::printf("%s\n", report.c_str());
  }
};
// Registered once a program, before main (gtest_main) runs the tests.
inline const bool seed_report_listening = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SeedReport);
  return true;
}();

inline Tensor random_tensor(std::vector<int64_t> shape, DType dtype, std::mt19937_64& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = dist(rng);
    if (dtype == DType::f32) t.data<float>()[i] = v;
    else t.data<bf16_t>()[i] = f32_to_bf16(v);
  }
  return t;
}

// ‖a − b‖ / ‖b‖ over n floats.
inline double relative_error(const float* a, const float* b, int64_t n) {
  double diff = 0.0, ref = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    ref += double(b[i]) * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-30);
}

inline double max_abs_diff(const float* a, const float* b, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

#ifdef FATHOM_FIXTURES_DIR
// The committed tiny models of every architecture (tests/fixtures/parity), by name.
inline std::vector<std::string> parity_fixtures() {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(fs::path(FATHOM_FIXTURES_DIR) / "parity"))
    if (fs::exists(e.path() / "config.json")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A committed tiny model (tests/fixtures/parity/<fixture>) storing KV as `scheme` says.
inline std::unique_ptr<Model> load_fixture(const std::string& fixture, const KvScheme& scheme = KvScheme::bf16()) {
  LoadOptions o;
  o.kv_scheme = scheme;
  return load_model((std::filesystem::path(FATHOM_FIXTURES_DIR) / "parity" / fixture).string(), o);
}

// bf16, and the affine kv4 scheme with its delayed start at `quantized_start`
// and TurboQuant k3v4 where the fixture's head_dim takes them.
inline std::vector<KvScheme> kv_schemes_for(const std::string& fixture, int64_t quantized_start) {
  const ModelConfig config = load_model_config((std::filesystem::path(FATHOM_FIXTURES_DIR) / "parity" / fixture).string());
  std::vector<KvScheme> out = {KvScheme::bf16()};
  for (const KvScheme& s : {KvScheme::affine_uniform(4, 32, quantized_start), KvScheme::turbo(3, 4, 0)}) {
    try {
      s.validate_for(config);
      out.push_back(s);
    } catch (const Error&) {
    }
  }
  return out;
}
#endif

// n token ids drawn uniformly from [0, vocab).
template <class Rng>
std::vector<int32_t> random_ids(int64_t n, int64_t vocab, Rng& rng) {
  std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = pick(rng);
  return ids;
}

}  // namespace fathom::testing
