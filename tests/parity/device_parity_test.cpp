// Every committed fixture model on each non-CPU backend against the CPU
// backend on the same fresh random tokens: a whole-prompt forward, a prefill
// followed by decode steps (KV appended and read back on the device), greedy
// choices, and the quantized KV schemes; and each fixture again with its
// weights quantized to 4 bits (MLX format). Where a backend cannot run (a build
// without it, a machine without a GPU) every case says it is skipped, by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <span>

#include "backend/cpu/kernels.h"
#include "model/model.h"
#include "quantized_fixture.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::relative_error;

struct DeviceCase {
  std::string device;
  std::string fixture;
  ComputeDType dtype;
  int bits = 0;  // > 0: the fixture's weights quantized to this many bits
};

std::vector<DeviceCase> device_cases() {
  std::vector<DeviceCase> cases;
  for (const std::string& fixture : testing::parity_fixtures())
    for (ComputeDType dtype : {ComputeDType::f32, ComputeDType::bf16})
      for (int bits : {0, 4}) cases.push_back({"cuda", fixture, dtype, bits});
  return cases;
}

class DeviceParity : public ::testing::TestWithParam<DeviceCase> {
 protected:
  void SetUp() override {
    try {
      make_backend(GetParam().device);
    } catch (const Error& e) {
      GTEST_SKIP() << "skipped: no " << GetParam().device << " backend: " << e.what();
    }
  }

  std::unique_ptr<Model> load(const std::string& device, const KvScheme& scheme = KvScheme::bf16()) const {
    LoadOptions o;
    o.dtype = GetParam().dtype;
    o.kv_scheme = scheme;
    o.device = device;
    const DeviceCase& c = GetParam();
    return load_model(c.bits ? testing::quantized_fixture(c.fixture, c.bits)
                             : (std::filesystem::path(FATHOM_FIXTURES_DIR) / "parity" / c.fixture).string(),
                      o);
  }

  // f32 compute agrees to 1e-4 per position. bf16 compute rounds every
  // matmul's inputs, so two summation orders drift further apart: the CPU's
  // own bf16 bound against transformers (3e-2, or twice the drift that
  // rounding only the weights causes in the hybrid fixtures).
  double tolerance() const {
    if (GetParam().dtype == ComputeDType::f32) return 1e-4;
    std::ifstream in(std::filesystem::path(FATHOM_FIXTURES_DIR) / "parity" / GetParam().fixture / "reference.json");
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    const double drift = j.is_object() ? j.value("bf16_weight_drift", 0.0) : 0.0;
    return std::max(3e-2, 2 * drift);
  }

  // Every row within the bound; where `routed`, from the first row past it
  // on (a token routed apart, and the rows that attend to it) within ten
  // times it.
  static void expect_rows_close(const Tensor& got, const Tensor& want, double tolerance, bool routed,
                                const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    const int64_t vocab = want.dim(1);
    bool apart = false;
    for (int64_t r = 0; r < want.dim(0); ++r) {
      const double error = relative_error(got.data<float>() + r * vocab, want.data<float>() + r * vocab, vocab);
      apart = apart || (routed && error >= tolerance);
      EXPECT_LT(error, apart ? 10 * tolerance : tolerance) << what << ", row " << r;
    }
  }
  // A mixture of experts may route a token differently on the two backends
  // where a near tie between experts is decided by rounding (bf16) or by a
  // quantized cache's code that flips (coded KV): such a row moves by far
  // more than rounding, and so do the rows after it, whose attention reads
  // its keys and values. Seen on the H200 in bf16: rows 9-14 of 21 at
  // 1.1-2.5 times the bound after one such tie. Seen on an H100 with 4-bit
  // KV in f32: the one position of 19 whose router had a near tie (top-k
  // margin 0.0036, the others 0.0085 to 0.97) moved 1.4 times as far as
  // quantization itself.
  bool routed(const Model& m, bool coded_kv = false) const {
    return m.config().num_experts > 0 && (GetParam().dtype == ComputeDType::bf16 || coded_kv);
  }
};

// Each step of a run held to its bound; where routed (above), two of them
// may instead land within ten times it.
class StepBound {
 public:
  explicit StepBound(bool routed) : routed_(routed) {}
  void expect(double error, double bound, const std::string& where) {
    if (routed_ && error >= bound) {
      ++loose_;
      EXPECT_LT(error, 10 * bound) << where;
      EXPECT_LE(loose_, 2) << where << ": too many steps beyond the bound " << bound;
    } else {
      EXPECT_LT(error, bound) << where;
    }
  }

 private:
  bool routed_;
  int loose_ = 0;
};

std::span<const float> row_of(const Tensor& logits, int64_t r) {
  return {logits.data<float>() + r * logits.dim(1), size_t(logits.dim(1))};
}

// The rule of a step's k-th pick: greedy, or a draw at a random temperature
// and min-p by a fresh uniform.
PickRule pick_rule(int64_t k, std::mt19937_64& rng) {
  if (k % 2 == 0) return {};
  std::uniform_real_distribution<double> u(0.0, 1.0);
  return {float(0.5 + u(rng)), u(rng) < 0.5 ? 0.0f : 0.05f, u(rng)};
}

// A step whose odd sequences asked for picks by `rules`, against the same
// step asking every row whole (`want`): the rows it returned whole are the
// even ones, bit for bit, and each pick is what the host's draw
// (cpu::pick_token) takes from that row by its rule.
void expect_rows_and_picks(const StepOutput& got, const Tensor& want, std::span<const PickRule> rules,
                           const std::string& what) {
  const int64_t rows = want.dim(0), picks = rows / 2;
  ASSERT_EQ(got.picks.numel(), picks) << what;
  ASSERT_EQ(got.logits.dim(0), rows - picks) << what;
  ASSERT_EQ(int64_t(rules.size()), picks) << what;
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> w = row_of(want, r);
    if (r % 2) {
      const PickRule& rule = rules[size_t(r / 2)];
      EXPECT_EQ(got.picks.data<int32_t>()[r / 2], cpu::pick_token(w, rule))
          << what << ", row " << r << " (temperature " << rule.temperature << ", min_p " << rule.min_p
          << ", uniform " << rule.uniform << ")";
    } else {
      ASSERT_EQ(0, std::memcmp(row_of(got.logits, r / 2).data(), w.data(), w.size_bytes())) << what << ", row " << r;
    }
  }
}

TEST_P(DeviceParity, ForwardMatchesTheCpu) {
  auto rng = testing::fresh_rng();
  auto cpu = load("cpu"), device = load(GetParam().device);
  const auto ids = testing::random_ids(21, cpu->config().vocab_size, rng);
  auto cpu_state = cpu->new_state(64), device_state = device->new_state(64);
  const Tensor want = cpu->forward(ids, *cpu_state, true);
  const Tensor got = device->forward(ids, *device_state, true);
  expect_rows_close(got, want, tolerance(), routed(*cpu), "whole prompt");
}

TEST_P(DeviceParity, DecodeStepsMatchTheCpuAndPickTheSameTokens) {
  auto rng = testing::fresh_rng();
  auto cpu = load("cpu"), device = load(GetParam().device);
  const int64_t vocab = cpu->config().vocab_size;
  auto cpu_state = cpu->new_state(64), device_state = device->new_state(64);
  std::vector<int32_t> ids = testing::random_ids(13, vocab, rng);
  Tensor want = cpu->forward(ids, *cpu_state, false), got = device->forward(ids, *device_state, false);
  StepBound bound(routed(*cpu));
  for (int step = 0; step < 10; ++step) {
    const double error = relative_error(got.data<float>(), want.data<float>(), vocab);
    bound.expect(error, tolerance(), "step " + std::to_string(step));
    // Greedy choices agree wherever the CPU's top two are further apart than
    // the two backends may differ (about the bound times the logits' rms).
    std::vector<float> row(want.data<float>(), want.data<float>() + vocab);
    double sum_sq = 0.0;
    for (float v : row) sum_sq += double(v) * v;
    const double rms = std::sqrt(sum_sq / double(vocab));
    const int32_t pick = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    const float best = row[size_t(pick)];
    row[size_t(pick)] = -INFINITY;
    const float second = *std::max_element(row.begin(), row.end());
    const int32_t device_pick =
        int32_t(std::max_element(got.data<float>(), got.data<float>() + vocab) - got.data<float>());
    if (best - second > std::max(1e-3 * std::max(1.0f, std::fabs(best)), 2 * tolerance() * rms)) {
      EXPECT_EQ(device_pick, pick) << "step " << step;
    }
    const std::vector<int32_t> next = {pick};
    want = cpu->forward(next, *cpu_state, false);
    got = device->forward(next, *device_state, false);
  }
}

// A quantized cache turns a rounding-level difference in a key into a whole
// quantization step when it falls on a code boundary, so the two backends are
// held to 1e-3 or, when larger, to half of what quantization itself moves the
// CPU's logits (against its unquantized cache on the same tokens).
TEST_P(DeviceParity, QuantizedKvMatchesTheCpu) {
  if (GetParam().dtype != ComputeDType::f32) GTEST_SKIP() << "quantized KV is compared in f32 compute";
  auto rng = testing::fresh_rng();
  auto plain = load("cpu");
  for (const KvScheme& scheme : testing::kv_schemes_for(GetParam().fixture, 8)) {
    if (scheme.cache_key() == KvScheme::bf16().cache_key()) continue;
    SCOPED_TRACE(scheme.cache_key());
    auto cpu = load("cpu", scheme), device = load(GetParam().device, scheme);
    const auto ids = testing::random_ids(19, cpu->config().vocab_size, rng);
    auto plain_state = plain->new_state(64), cpu_state = cpu->new_state(64), device_state = device->new_state(64);
    StepBound bound(routed(*cpu, true));
    // A prefill past the delayed start, then decode steps over the coded rows.
    for (size_t begin = 0; begin < ids.size(); begin = begin == 0 ? 12 : begin + 1) {
      const std::vector<int32_t> chunk(ids.begin() + int64_t(begin), ids.begin() + (begin == 0 ? 12 : int64_t(begin) + 1));
      const Tensor exact = plain->forward(chunk, *plain_state, false);
      const Tensor want = cpu->forward(chunk, *cpu_state, false), got = device->forward(chunk, *device_state, false);
      const int64_t vocab = want.dim(1);
      const double quantization = relative_error(want.data<float>(), exact.data<float>(), vocab);
      bound.expect(relative_error(got.data<float>(), want.data<float>(), vocab), std::max(1e-3, 0.5 * quantization),
                   "position " + std::to_string(begin + chunk.size() - 1) +
                       " (quantization moves the CPU's logits by " + std::to_string(quantization) + ")");
    }
  }
}

// Decode steps recorded and replayed as graphs compute exactly what the same
// ops launched one by one compute: three sequences of different lengths
// decode together past KV block boundaries (new blocks, longer block tables,
// more key splits: replays with updated nodes), and every fifth step one of
// them sits out (a step of another shape).
TEST_P(DeviceParity, ReplayedStepsEqualEagerStepsBitForBit) {
  auto rng = testing::fresh_rng();
  std::vector<KvScheme> schemes = {KvScheme::bf16()};
  if (GetParam().dtype == ComputeDType::f32)
    for (const KvScheme& s : testing::kv_schemes_for(GetParam().fixture, 8))
      if (s.cache_key() != KvScheme::bf16().cache_key()) schemes.push_back(s);
  for (const KvScheme& scheme : schemes) {
    SCOPED_TRACE(scheme.cache_key());
    ::setenv("FATHOM_CUDA_GRAPHS", "0", 1);
    auto eager = load(GetParam().device, scheme);
    ::unsetenv("FATHOM_CUDA_GRAPHS");
    auto replayed = load(GetParam().device, scheme);
    const int64_t vocab = eager->config().vocab_size;
    std::vector<std::unique_ptr<SequenceState>> eager_states, replayed_states;
    std::vector<int32_t> last;
    for (const int64_t length : {5, 9, 240}) {
      eager_states.push_back(eager->new_state(512));
      replayed_states.push_back(replayed->new_state(512));
      const auto ids = testing::random_ids(length, vocab, rng);
      const Tensor want = eager->forward(ids, *eager_states.back(), false);
      const Tensor got = replayed->forward(ids, *replayed_states.back(), false);
      ASSERT_EQ(0, std::memcmp(got.raw(), want.raw(), want.nbytes())) << "prompt of " << length;
      last.push_back(int32_t(std::max_element(want.data<float>(), want.data<float>() + vocab) - want.data<float>()));
    }
    for (int step = 0; step < 60; ++step) {
      std::vector<SequenceStep> eager_step, replayed_step;
      std::vector<size_t> members;
      std::vector<PickRule> rules;
      for (size_t i = 0; i < last.size(); ++i) {
        if (step % 5 == 4 && i == size_t(step / 5) % last.size()) continue;
        members.push_back(i);
        eager_step.push_back({eager_states[i].get(), {last[i]}, WantLogits::last});
        if (members.size() % 2 == 0) {  // odd rows of the step
          rules.push_back(pick_rule(step + int64_t(i), rng));
          replayed_step.push_back({replayed_states[i].get(), {last[i]}, WantLogits::pick, rules.back()});
        } else {
          replayed_step.push_back({replayed_states[i].get(), {last[i]}, WantLogits::last});
        }
      }
      const Tensor want = eager->forward(eager_step).logits;
      expect_rows_and_picks(replayed->forward(replayed_step), want, rules, "step " + std::to_string(step));
      for (size_t m = 0; m < members.size(); ++m) last[members[m]] = cpu::argmax(row_of(want, int64_t(m)));
    }
    const Backend::StepReplays r = replayed->backend().step_replays();
    EXPECT_EQ(eager->backend().step_replays().replays, 0);
    if (eager->config().num_experts == 0 && !eager->config().enable_moe_block) {
      EXPECT_GE(r.replays, 50) << "captures " << r.captures;
      EXPECT_LE(r.captures, 10);
    }
  }
}

// A step as wide as a server's batch (more rows than the GEMVs take, so
// its matmuls are cuBLAS's or widened quantized panels inside the graph) is
// recorded and replayed too, and equals the eager step bit for bit.
TEST_P(DeviceParity, WideReplayedStepsEqualEagerSteps) {
  auto rng = testing::fresh_rng();
  constexpr int64_t kSequences = 40;
  static_assert(kSequences <= Model::kReplayableStepRows);
  ::setenv("FATHOM_CUDA_GRAPHS", "0", 1);
  auto eager = load(GetParam().device, KvScheme::bf16());
  ::unsetenv("FATHOM_CUDA_GRAPHS");
  auto replayed = load(GetParam().device, KvScheme::bf16());
  const int64_t vocab = eager->config().vocab_size;
  std::vector<std::unique_ptr<SequenceState>> eager_states, replayed_states;
  std::vector<int32_t> last;
  std::uniform_int_distribution<int64_t> length(1, 40);
  for (int64_t i = 0; i < kSequences; ++i) {
    eager_states.push_back(eager->new_state(128));
    replayed_states.push_back(replayed->new_state(128));
    const auto ids = testing::random_ids(length(rng), vocab, rng);
    const Tensor want = eager->forward(ids, *eager_states.back(), false);
    replayed->forward(ids, *replayed_states.back(), false);
    last.push_back(int32_t(std::max_element(want.data<float>(), want.data<float>() + vocab) - want.data<float>()));
  }
  const int64_t replays_before = replayed->backend().step_replays().replays;
  for (int step = 0; step < 12; ++step) {
    std::vector<SequenceStep> eager_step, replayed_step;
    std::vector<PickRule> rules;
    for (int64_t i = 0; i < kSequences; ++i) {
      eager_step.push_back({eager_states[size_t(i)].get(), {last[size_t(i)]}, WantLogits::last});
      if (i % 2) rules.push_back(pick_rule(i / 2, rng));
      replayed_step.push_back({replayed_states[size_t(i)].get(), {last[size_t(i)]},
                               i % 2 ? WantLogits::pick : WantLogits::last, i % 2 ? rules.back() : PickRule{}});
    }
    const Tensor want = eager->forward(eager_step).logits;
    expect_rows_and_picks(replayed->forward(replayed_step), want, rules, "step " + std::to_string(step));
    for (int64_t i = 0; i < kSequences; ++i) last[size_t(i)] = cpu::argmax(row_of(want, i));
  }
  if (eager->config().num_experts == 0 && !eager->config().enable_moe_block) {
    EXPECT_GE(replayed->backend().step_replays().replays - replays_before, 8);
  }
}

std::string case_name(const ::testing::TestParamInfo<DeviceCase>& info) {
  std::string name = info.param.device + "_" + info.param.fixture + "_" +
                     (info.param.dtype == ComputeDType::f32 ? "f32" : "bf16") +
                     (info.param.bits ? "_q" + std::to_string(info.param.bits) : "");
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeviceParity, ::testing::ValuesIn(device_cases()), case_name);

}  // namespace
}  // namespace fathom
