// Attention products over coded K/V rows (backend/cpu/coded_rows.h), the
// reference and the fast kernels, against a double-precision product with the
// rows quantized by the codecs and widened as the codecs widen them: every
// affine width × group and codebook width, at real head dims, query counts
// and block lengths.
#include "backend/cpu/coded_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/affine_codec.h"
#include "backend/turbo_codec.h"
#include "test_util.h"

namespace fathom {
namespace {

using cpu::CodedRows;
using testing::fresh_rng;

// Rows beyond 64 cover the fast kernels' blocking of long runs.
constexpr int64_t kMaxRows = 130;

// kMaxRows coded rows of width d, quantized from random values, and the same
// rows widened to f32 by the codec (what attention would otherwise multiply).
struct CodedCache {
  std::vector<uint32_t> codes;
  std::vector<bf16_t> scales, biases;
  std::vector<float> row_scales, table;
  std::vector<float> widened;  // [kMaxRows, d]
  // [kMaxRows, d] the size of each value's parts, |scale·code| + |bias| for
  // affine rows: kernels that apply scale and bias apart (as the fast ones
  // do) round on that scale, which exceeds |value| where the two cancel.
  std::vector<float> size;
  CodedRows rows;
};

CodedCache affine_cache(int bits, int group, int64_t d, std::mt19937_64& rng) {
  const AffineLayout layout{bits, group, d};
  CodedCache c;
  c.codes.resize(size_t(kMaxRows * layout.words()));
  c.scales.resize(size_t(kMaxRows * layout.groups()));
  c.biases.resize(c.scales.size());
  c.widened.resize(size_t(kMaxRows * d));
  c.size.resize(c.widened.size());
  std::normal_distribution<float> value(0.4f, 1.0f);  // off-centre, so biases matter
  std::vector<float> x(static_cast<size_t>(d));
  for (int64_t j = 0; j < kMaxRows; ++j) {
    for (float& e : x) e = value(rng);
    affine_quantize_row(x.data(), layout, &c.codes[j * layout.words()], &c.scales[j * layout.groups()],
                        &c.biases[j * layout.groups()]);
    affine_dequantize_row(&c.codes[j * layout.words()], &c.scales[j * layout.groups()],
                          &c.biases[j * layout.groups()], layout, &c.widened[j * d]);
    for (int64_t i = 0; i < d; ++i) {
      const int64_t g = j * layout.groups() + i / group;
      const float bias = bf16_to_f32(c.biases[g]);
      c.size[j * d + i] = std::fabs(c.widened[j * d + i] - bias) + std::fabs(bias);
    }
  }
  c.rows = {c.codes.data(), layout.words(), bits, c.scales.data(), c.biases.data(), group, nullptr, nullptr};
  return c;
}

CodedCache codebook_cache(int bits, int64_t d, std::mt19937_64& rng) {
  const LloydMaxCodebook& book = lloyd_max_codebook(bits);
  const int64_t words = packed_code_words(d, bits);
  CodedCache c;
  c.codes.resize(size_t(kMaxRows * words));
  c.row_scales.resize(kMaxRows);
  c.table = book.centroids;
  c.widened.resize(size_t(kMaxRows * d));
  std::normal_distribution<float> value(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(d));
  for (int64_t j = 0; j < kMaxRows; ++j) {
    for (float& e : x) e = value(rng);
    float norm = 0.0f;
    turbo_quantize_row(x.data(), d, book, &c.codes[j * words], &norm);
    // Widened as turbo_dequantize_row does (table scaled by norm / √d), with
    // the plain unpacking (the reference of the reference).
    c.row_scales[j] = norm / std::sqrt(float(d));
    float table[16];
    for (size_t e = 0; e < book.centroids.size(); ++e) table[e] = c.row_scales[j] * book.centroids[e];
    cpu::dequant_table_row_reference(&c.codes[j * words], bits, table, d, &c.widened[j * d]);
  }
  for (size_t i = 0; i < c.widened.size(); ++i) c.size.push_back(std::fabs(c.widened[i]));
  c.rows = {c.codes.data(), words, bits, nullptr, nullptr, 0, c.row_scales.data(), c.table.data()};
  return c;
}

std::vector<float> random_floats(int64_t n, std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = dist(rng);
  return v;
}

// Worst |got − exact| / Σ|terms| of scores and of values over nq × n, for one
// cache, a term's size taken from CodedCache::size.
struct Errors {
  double scores = 0.0, values = 0.0;
};

Errors run_case(const cpu::CodedRowKernels& kernels, const CodedCache& c, int64_t d, int64_t nq, int64_t n,
                std::mt19937_64& rng) {
  const int64_t ld = n + 3;  // rows of scores and probabilities wider than n
  Errors e;
  const std::vector<float> q = random_floats(nq * d, rng, -1.0f, 1.0f);
  std::vector<float> scores = random_floats(nq * ld, rng, -1.0f, 1.0f);
  kernels.scores(q.data(), nq, d, c.rows, n, scores.data(), ld);
  for (int64_t qi = 0; qi < nq; ++qi)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0.0, size = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        exact += double(q[qi * d + i]) * c.widened[j * d + i];
        size += std::fabs(double(q[qi * d + i]) * c.size[j * d + i]);
      }
      e.scores = std::max(e.scores, std::fabs(scores[qi * ld + j] - exact) / size);
    }

  const std::vector<float> p = random_floats(nq * ld, rng, 0.0f, 1.0f);
  const std::vector<float> start = random_floats(nq * d, rng, -1.0f, 1.0f);
  std::vector<float> out = start;  // values accumulate into it
  kernels.values(p.data(), ld, nq, c.rows, d, n, out.data());
  for (int64_t qi = 0; qi < nq; ++qi)
    for (int64_t i = 0; i < d; ++i) {
      double exact = start[qi * d + i], size = std::fabs(start[qi * d + i]);
      for (int64_t j = 0; j < n; ++j) {
        exact += double(p[qi * ld + j]) * c.widened[j * d + i];
        size += std::fabs(double(p[qi * ld + j]) * c.size[j * d + i]);
      }
      e.values = std::max(e.values, std::fabs(out[qi * d + i] - exact) / size);
    }
  return e;
}

// Every layout the caches use, each at every query count and row count.
void expect_matches_widened_rows(const cpu::CodedRowKernels& kernels) {
  auto rng = fresh_rng();
  constexpr double kTolerance = 1e-5;
  auto check_cache = [&](const CodedCache& c, int64_t d, const std::string& layout) {
    for (int64_t nq : {1, 3, 8, 16})
      for (int64_t n : {int64_t(1), int64_t(5), int64_t(37), int64_t(64), kMaxRows}) {
        const Errors e = run_case(kernels, c, d, nq, n, rng);
        EXPECT_LT(e.scores, kTolerance) << "scores " << layout << " d=" << d << " nq=" << nq << " n=" << n;
        EXPECT_LT(e.values, kTolerance) << "values " << layout << " d=" << d << " nq=" << nq << " n=" << n;
      }
  };
  // 96: three groups of 32, which the fast values kernel weighs one by one.
  for (int64_t d : {64, 96, 128, 256}) {
    for (int bits : {2, 3, 4, 6, 8})
      for (int group : {32, 64, 128})
        if (d % group == 0)
          check_cache(affine_cache(bits, group, d, rng), d,
                      "affine bits=" + std::to_string(bits) + " group=" + std::to_string(group));
    for (int bits : {1, 2, 3, 4}) check_cache(codebook_cache(bits, d, rng), d, "codebook bits=" + std::to_string(bits));
  }
}

TEST(CodedRows, ReferenceMatchesWidenedRows) {
  expect_matches_widened_rows({cpu::coded_scores_reference, cpu::coded_values_reference});
}

TEST(CodedRows, Avx512MatchesWidenedRows) {
  if (cpu::detect_isa() != cpu::Isa::avx512)
    GTEST_SKIP() << "this processor lacks AVX-512 (F, BW, BF16); the AVX-512 coded-row kernels cannot run";
  expect_matches_widened_rows({cpu::coded_scores_avx512, cpu::coded_values_avx512});
}

TEST(CodedRows, BestKernelsFollowTheProcessor) {
  const cpu::CodedRowKernels best = cpu::best_coded_row_kernels();
  if (cpu::detect_isa() == cpu::Isa::avx512) {
    EXPECT_EQ(best.scores, &cpu::coded_scores_avx512);
    EXPECT_EQ(best.values, &cpu::coded_values_avx512);
  } else {
    EXPECT_EQ(best.scores, &cpu::coded_scores_reference);
    EXPECT_EQ(best.values, &cpu::coded_values_reference);
  }
}

}  // namespace
}  // namespace fathom
