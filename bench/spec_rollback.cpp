// The cost of a speculative verify step and its rollback on a model, against a
// plain decode step (issue 13: "the cost of rollback on a hybrid model").
//
//   spec_rollback --model DIR [--dtype bf16] [--threads 2] [--context 256]
//                 [--repeat 15] [--drafts 1,2,4,8]
//
// After a prefill of --context random tokens, each repetition times, in turn:
//   decode      one forward of 1 token (the plain decode step);
//   for every K in --drafts, a verify step of K + 1 rows (the pending token and
//   K drafts, all logits) inside a transaction, then
//   all kept    resolve(K + 1): every draft accepted;
//   partial     resolve(1 + K / 2): half the drafts accepted.
// Times are medians over the repetitions, in milliseconds. The state's bytes
// are read after the prefill and at their peak inside a step (after the verify
// forward, before resolve).
// Prints a Markdown table and one JSON object. The checkpoint + replay strategy
// that per-position snapshots replaced was measured with this file as of
// commit 270044d built at commit 5b0c9b0 (bench/RESULTS.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace fathom {
namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

struct Options {
  std::string model;
  std::string dtype = "bf16";
  int threads = 2;
  int64_t context = 256;
  int repeat = 15;
  std::vector<int64_t> drafts = {1, 2, 4, 8};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    check(i + 1 < argc, "spec_rollback: ", a, " needs a value");
    const std::string v = argv[++i];
    if (a == "--model") o.model = v;
    else if (a == "--dtype") o.dtype = v;
    else if (a == "--threads") o.threads = std::stoi(v);
    else if (a == "--context") o.context = std::stoll(v);
    else if (a == "--repeat") o.repeat = std::stoi(v);
    else if (a == "--drafts") {
      o.drafts.clear();
      std::stringstream s(v);
      for (std::string part; std::getline(s, part, ',');) o.drafts.push_back(std::stoll(part));
    } else {
      throw Error("usage: spec_rollback --model DIR [--dtype bf16] [--threads 2] [--context 256] [--repeat 15] "
                  "[--drafts 1,2,4,8]");
    }
  }
  check(!o.model.empty(), "spec_rollback: --model is required");
  check(o.context > 0 && o.repeat > 0 && o.threads > 0, "spec_rollback: --context, --repeat, --threads must be positive");
  for (int64_t k : o.drafts) check(k >= 1, "spec_rollback: draft counts must be >= 1, got ", k);
  return o;
}

struct Timings {
  std::vector<double> all_kept, partial;
  int64_t peak_bytes = 0;   // state bytes inside the transaction
};

int run(const Options& o) {
  ThreadPool::set_global_threads(o.threads);
  LoadOptions load;
  load.dtype = parse_compute_dtype(o.dtype);
  auto model = load_model(o.model, load);
  const int64_t vocab = model->config().vocab_size;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab - 1));
  auto tokens = [&](int64_t n) {
    std::vector<int32_t> ids(size_t(n), 0);
    for (auto& id : ids) id = pick(rng);
    return ids;
  };

  int64_t per_repeat = 2;  // the decode step and slack
  for (int64_t k : o.drafts) per_repeat += (k + 1) + (1 + k / 2) * 2;
  auto state = model->new_state(o.context + 4 + (o.repeat + 1) * per_repeat);
  model->forward(tokens(o.context), *state, false);
  for (int i = 0; i < 3; ++i) model->forward(tokens(1), *state, false);  // warm-up: weights paged in
  const int64_t committed_bytes = state->bytes();

  std::vector<double> decode;
  std::vector<Timings> verify(o.drafts.size());
  for (int r = 0; r <= o.repeat; ++r) {  // repetition 0 warms every shape up, untimed
    auto t0 = clock_type::now();
    model->forward(tokens(1), *state, false);
    if (r > 0) decode.push_back(ms_since(t0));
    for (size_t i = 0; i < o.drafts.size(); ++i) {
      const int64_t rows = o.drafts[i] + 1, kept = 1 + o.drafts[i] / 2;
      Timings& v = verify[i];
      for (const int64_t keep : {rows, kept}) {
        const std::vector<int32_t> step = tokens(rows);
        t0 = clock_type::now();
        state->begin(rows);
        model->forward(step, *state, /*all_logits=*/true);
        v.peak_bytes = std::max(v.peak_bytes, state->bytes());
        state->resolve(keep);
        const double total = ms_since(t0);
        if (r == 0) continue;
        if (keep == rows) {
          v.all_kept.push_back(total);
          continue;
        }
        v.partial.push_back(total);
      }
    }
  }

  const double dec = median(decode);
  std::printf("| K (rows) | kept | verify + resolve, all kept (ms) | verify + resolve, partial (ms) | "
              "partial ÷ all kept | partial ÷ decode | state bytes in step |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  std::printf("| decode (1) | 1 | %.2f | | | 1.00 | %lld |\n", dec, static_cast<long long>(committed_bytes));
  nlohmann::json out = {{"model", o.model},
                        {"dtype", o.dtype},
                        {"threads", o.threads},
                        {"context", o.context},
                        {"repeat", o.repeat},
                        {"decode_ms", dec},
                        {"state_bytes", committed_bytes},
                        {"verify", nlohmann::json::array()}};
  for (size_t i = 0; i < o.drafts.size(); ++i) {
    const Timings& v = verify[i];
    const int64_t k = o.drafts[i];
    const double all = median(v.all_kept), part = median(v.partial);
    std::printf("| %lld (%lld) | %lld | %.2f | %.2f | %.2f | %.2f | %lld |\n", static_cast<long long>(k),
                static_cast<long long>(k + 1), static_cast<long long>(1 + k / 2), all, part, part / all, part / dec,
                static_cast<long long>(v.peak_bytes));
    out["verify"].push_back({{"drafts", k},
                             {"rows", k + 1},
                             {"kept", 1 + k / 2},
                             {"all_kept_ms", all},
                             {"partial_ms", part},
                             {"peak_state_bytes", v.peak_bytes}});
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace fathom

int main(int argc, char** argv) {
  try {
    return fathom::run(fathom::parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spec_rollback: %s\n", e.what());
    return 1;
  }
}
