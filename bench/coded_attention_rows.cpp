// Decode attention for one kv group straight from coded (quantized) KV rows
// (backend/cpu/coded_rows.h) against the bf16 decode kernel, one thread.
//
//   coded_attention_rows [--d 128] [--nq 2] [--n 4096] [--block 64] [--heads 1] [--repeat 31]
//
// One attention is what decode does per kv group: scores block by block,
// softmax over all n rows, then the value sums block by block (for bf16,
// attend_decode_avx512 over the same blocks as runs). --heads H walks H
// separate caches in turn: 1 keeps the rows in the processor's caches, a large
// H makes every row come from memory, as in a decode step over many layers.
// Prints ns per row (K and V), the median over --repeat passes, and the
// scores-only and values-only times of the coded kernels.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/coded_rows.h"
#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "backend/affine_codec.h"
#include "backend/turbo_codec.h"

namespace fathom {
namespace {

using clock_type = std::chrono::steady_clock;

struct Options {
  int64_t d = 128, nq = 2, n = 4096, block = 64, heads = 1;
  int repeat = 31;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    check(i + 1 < argc, "coded_attention_rows: ", a, " needs a value");
    const int64_t v = std::stoll(argv[++i]);
    if (a == "--d") o.d = v;
    else if (a == "--nq") o.nq = v;
    else if (a == "--n") o.n = v;
    else if (a == "--block") o.block = v;
    else if (a == "--heads") o.heads = v;
    else if (a == "--repeat") o.repeat = int(v);
    else
      throw Error("usage: coded_attention_rows [--d 128] [--nq 2] [--n 4096] [--block 64] [--heads 1] [--repeat 31]");
  }
  check(o.d % 32 == 0 && o.nq >= 1 && o.n >= 1 && o.block >= 1 && o.heads >= 1 && o.repeat >= 1,
        "coded_attention_rows: d must be a multiple of 32 and the counts positive");
  return o;
}

// The coded rows of `heads` caches × n rows (K or V). Codes are random bits:
// the time does not depend on their values.
struct Coded {
  std::vector<uint32_t> codes;
  std::vector<bf16_t> scales, biases;
  std::vector<float> row_scales, table;
  cpu::CodedRows all;  // every row of every head, consecutive
  int64_t groups = 1;

  // Rows [j, j + count) of head h.
  cpu::CodedRows rows(int64_t h, int64_t j, int64_t n) const {
    cpu::CodedRows r = all;
    const int64_t at = h * n + j;
    r.codes += at * r.words;
    if (r.scales) r.scales += at * groups, r.biases += at * groups;
    if (r.row_scales) r.row_scales += at;
    return r;
  }
  int64_t row_bytes() const { return all.words * 4 + (all.table ? 4 : 4 * groups); }
};

Coded make_coded(int bits, int group, bool codebook, int64_t d, int64_t rows, std::mt19937& rng) {
  Coded c;
  const int64_t words = packed_code_words(d, bits);
  c.codes.resize(size_t(rows * words));
  for (auto& w : c.codes) w = rng();
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  if (codebook) {
    c.table = lloyd_max_codebook(bits).centroids;
    c.row_scales.resize(size_t(rows));
    for (auto& s : c.row_scales) s = 0.5f + u(rng);
    c.all = {c.codes.data(), words, bits, nullptr, nullptr, 0, c.row_scales.data(), c.table.data()};
  } else {
    c.groups = d / group;
    c.scales.resize(size_t(rows * c.groups));
    c.biases.resize(c.scales.size());
    for (auto& s : c.scales) s = f32_to_bf16(0.01f + 0.1f * u(rng));
    for (auto& b : c.biases) b = f32_to_bf16(-1.0f + u(rng));
    c.all = {c.codes.data(), words, bits, c.scales.data(), c.biases.data(), group, nullptr, nullptr};
  }
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ns per row of f(h) over o.repeat passes of every head (one untimed pass first).
template <class F>
double ns_per_row(const Options& o, F f) {
  std::vector<double> times;
  for (int r = 0; r <= o.repeat; ++r) {
    const auto t0 = clock_type::now();
    for (int64_t h = 0; h < o.heads; ++h) f(h);
    const double ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
    if (r > 0) times.push_back(ns / double(o.heads * o.n));
  }
  return median(times);
}

struct Scheme {
  const char* name;
  int k_bits, v_bits, group;
  bool codebook;
};

int run(const Options& o) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t rows = o.heads * o.n;
  const float scale = 1.0f / std::sqrt(float(o.d));
  std::vector<float> q(size_t(o.nq * o.d)), out(q.size()), scores(size_t(o.nq * o.n));
  for (auto& x : q) x = u(rng);
  const cpu::CodedRowKernels kern = cpu::best_coded_row_kernels();
  std::printf("d=%lld nq=%lld n=%lld block=%lld heads=%lld repeat=%d, one thread\n", (long long)o.d, (long long)o.nq,
              (long long)o.n, (long long)o.block, (long long)o.heads, o.repeat);
  std::printf("| K/V rows | bytes per row (K+V) | attention ns/row | scores ns/row | values ns/row |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");

  const Scheme schemes[] = {{"affine 8-bit g64", 8, 8, 64, false},
                            {"affine 4-bit g64", 4, 4, 64, false},
                            {"codebook k3/v4", 3, 4, 0, true}};
  for (const Scheme& s : schemes) {
    const Coded k = make_coded(s.k_bits, s.group, s.codebook, o.d, rows, rng);
    const Coded v = make_coded(s.v_bits, s.group, s.codebook, o.d, rows, rng);
    std::vector<float> qs = q;
    for (auto& x : qs) x *= scale;
    auto all_scores = [&](int64_t h) {
      for (int64_t j = 0; j < o.n; j += o.block)
        kern.scores(qs.data(), o.nq, o.d, k.rows(h, j, o.n), std::min(o.block, o.n - j), scores.data() + j, o.n);
    };
    auto all_values = [&](int64_t h) {
      std::fill(out.begin(), out.end(), 0.0f);
      for (int64_t j = 0; j < o.n; j += o.block)
        kern.values(scores.data() + j, o.n, o.nq, v.rows(h, j, o.n), o.d, std::min(o.block, o.n - j), out.data());
    };
    const double attention = ns_per_row(o, [&](int64_t h) {
      all_scores(h);
      for (int64_t qi = 0; qi < o.nq; ++qi) cpu::softmax_row_avx512(scores.data() + qi * o.n, o.n, 0, o.n - 1);
      all_values(h);
    });
    const double s_only = ns_per_row(o, all_scores), v_only = ns_per_row(o, all_values);
    std::printf("| %s | %lld | %.2f | %.2f | %.2f |\n", s.name, (long long)(k.row_bytes() + v.row_bytes()), attention,
                s_only, v_only);
  }

  // bf16 rows, the same blocks handed to the decode kernel as runs.
  std::vector<bf16_t> kb(size_t(rows * o.d)), vb(kb.size());
  for (auto& x : kb) x = f32_to_bf16(u(rng));
  for (auto& x : vb) x = f32_to_bf16(u(rng));
  std::vector<float> scratch(size_t(o.nq * o.d + std::min<int64_t>(o.nq, 8) * o.n));
  std::vector<std::vector<cpu::KvRun>> runs(size_t(o.heads));
  for (int64_t h = 0; h < o.heads; ++h)
    for (int64_t j = 0; j < o.n; j += o.block) {
      const size_t at = size_t((h * o.n + j) * o.d);
      runs[h].push_back({kb.data() + at, vb.data() + at, std::min(o.block, o.n - j)});
    }
  const double bf16 = ns_per_row(o, [&](int64_t h) {
    cpu::attend_decode_avx512(q.data(), o.nq, scale, runs[h].data(), int64_t(runs[h].size()), DType::bf16, o.d, o.n,
                              scratch.data(), out.data(), nullptr);
  });
  std::printf("| bf16 (attend_decode_avx512) | %lld | %.2f | | |\n", (long long)(4 * o.d), bf16);
  return 0;
}

}  // namespace
}  // namespace fathom

int main(int argc, char** argv) {
  try {
    return fathom::run(fathom::parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
