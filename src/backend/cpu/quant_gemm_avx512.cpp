// Prefill over affine-quantized weights with bf16 x (kernels.h, quant_gemm_avx512).
// Compiled with -mavx512f -mavx512bw -mavx512bf16.
//
// The codes are exact small integers in bf16, so x · q needs no rounding
// beyond bf16 compute's own rounding of x: each group of K is one block of the
// pair kernel (outputs in lanes, 16 weight rows per vector, x broadcast as
// pairs of k), its partial sum scaled by the 16 rows' scales of that group as
// it is added to y, with the group's bias_g · Σ x_g. y starts at the bias. W
// itself is never rounded: the result is the f32-weight product up to
// summation order.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/codes_avx512.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/pack_pairs_avx512.h"

namespace fathom::cpu {
namespace {

constexpr int kRm = 6;  // rows of x per register tile
constexpr int64_t kRowBlock = 8 * kRm;  // rows of x that go through all groups together

// y[i][c] += scale[c] · Σ_p x[i] pair p · wp pair p, column c, + bias[c] · Σ x[i]
// of the group; RV vectors of 16 columns.
template <int RM, int RV>
inline void scaled_tile(const bf16_t* x, int64_t ldx, const bf16_t* wp, int64_t pairs, const QuantGroupTerms& t,
                        float* y, int64_t ldy) {
  __m512 acc[RM][RV];
  for (int i = 0; i < RM; ++i)
    for (int v = 0; v < RV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh wv[RV];
    for (int v = 0; v < RV; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(wp + (p * RV + v) * 32);
    for (int i = 0; i < RM; ++i) {
      int32_t both;
      std::memcpy(&both, x + i * ldx + 2 * p, sizeof both);
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(both);
      for (int v = 0; v < RV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], xv, wv[v]);
    }
  }
  for (int i = 0; i < RM; ++i) {
    const __m512 sum = _mm512_set1_ps(t.sums[i * t.sums_stride]);
    for (int v = 0; v < RV; ++v) {
      float* out = y + i * ldy + v * 16;
      const __m512 with_bias = _mm512_fmadd_ps(_mm512_loadu_ps(t.bias + v * 16), sum, _mm512_loadu_ps(out));
      _mm512_storeu_ps(out, _mm512_fmadd_ps(acc[i][v], _mm512_loadu_ps(t.scale + v * 16), with_bias));
    }
  }
}

template <int RV>
void scaled_rows(int64_t M, const bf16_t* x, int64_t ldx, const bf16_t* wp, int64_t pairs, QuantGroupTerms t,
                 float* y, int64_t ldy) {
  int64_t m = 0;
  for (; m + kRm <= M; m += kRm, t.sums += kRm * t.sums_stride)
    scaled_tile<kRm, RV>(x + m * ldx, ldx, wp, pairs, t, y + m * ldy, ldy);
  switch (M - m) {
    case 5: scaled_tile<5, RV>(x + m * ldx, ldx, wp, pairs, t, y + m * ldy, ldy); break;
    case 4: scaled_tile<4, RV>(x + m * ldx, ldx, wp, pairs, t, y + m * ldy, ldy); break;
    case 3: scaled_tile<3, RV>(x + m * ldx, ldx, wp, pairs, t, y + m * ldy, ldy); break;
    case 2: scaled_tile<2, RV>(x + m * ldx, ldx, wp, pairs, t, y + m * ldy, ldy); break;
    case 1: scaled_tile<1, RV>(x + m * ldx, ldx, wp, pairs, t, y + m * ldy, ldy); break;
    default: break;
  }
}

// Codes [first, first + count) of one row as bf16 values (exact integers).
void codes_as_bf16(const uint32_t* row, int bits, int64_t K, int64_t first, int64_t count, bf16_t* out) {
  const int64_t simd = simd_codes(bits, K);
  int64_t i = first;
  for (; i + 16 <= first + count && i + 16 <= simd; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (i - first)),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_cvtepi32_ps(codes16(row, bits, i))));
  for (; i < first + count; ++i) out[i - first] = f32_to_bf16(float(code_at(row, bits, i)));
}

}  // namespace

int64_t quant_gemm_scratch_bytes(int64_t K, int group) {
  const int64_t groups = K / group;
  return kQuantGemmCols * group * 2 + kQuantGemmCols * K * 2 + 2 * groups * kQuantGemmCols * 4;
}

QuantGemmPanel quant_gemm_panel(const QuantMatmulArgs& a, int64_t n0, int64_t n1, void* scratch) {
  const int64_t G = a.group, groups = a.K / G, words = a.K * a.bits / 32, cols = n1 - n0;
  const size_t param_bytes = dtype_size(a.params);
  bf16_t* row_values = static_cast<bf16_t*>(scratch);     // every column's codes of one group
  bf16_t* wp = row_values + kQuantGemmCols * G;            // the panel's codes, group after group, as pairs × columns
  float* scales = reinterpret_cast<float*>(wp + kQuantGemmCols * a.K);  // [group][column]
  float* biases = scales + groups * kQuantGemmCols;
  for (int64_t c = 0; c < cols; ++c) {
    const char* s = static_cast<const char*>(a.scales) + size_t((n0 + c) * groups) * param_bytes;
    const char* b = static_cast<const char*>(a.biases) + size_t((n0 + c) * groups) * param_bytes;
    for (int64_t g = 0; g < groups; ++g) {
      scales[g * cols + c] = param_at(s, a.params, g);
      biases[g * cols + c] = param_at(b, a.params, g);
    }
  }
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < cols; ++c) codes_as_bf16(a.codes + (n0 + c) * words, a.bits, a.K, g * G, G, row_values + c * G);
    bf16_t* wg = wp + g * G * cols;
    for (int64_t c = 0; c < cols; c += 16)  // group sizes are whole 16s of pairs
      for (int64_t p = 0; p < G / 2; p += 16)
        pack_pairs16_avx512(row_values + c * G + 2 * p, G, wg + (p * cols + c) * 2, cols * 2);
  }
  return {wp, scales, biases, n0, cols, groups};
}

void quant_gemm_start_rows(const QuantMatmulArgs& a, const QuantGemmPanel& p, int64_t m0, int64_t rows) {
  for (int64_t m = 0; m < rows; ++m) {
    float* y = a.y + (m0 + m) * a.N + p.n0;
    if (a.bias) std::memcpy(y, a.bias + p.n0, size_t(p.cols) * sizeof(float));
    else std::memset(y, 0, size_t(p.cols) * sizeof(float));
  }
}

QuantGroupTerms quant_gemm_group_terms(const QuantMatmulArgs& a, const QuantGemmPanel& p, int64_t g, int64_t m0) {
  return {p.scales + g * p.cols, p.biases + g * p.cols, a.x_group_sums + m0 * p.groups + g, p.groups};
}

void quant_gemm_add_rows_avx512(const QuantMatmulArgs& a, const bf16_t* xb, const QuantGemmPanel& p, int64_t m0,
                                int64_t rows) {
  const int64_t G = a.group;
  float* y = a.y + m0 * a.N + p.n0;
  for (int64_t g = 0; g < p.groups; ++g) {
    const bf16_t* xg = xb + m0 * a.K + g * G;
    const bf16_t* wg = p.codes + g * G * p.cols;
    const QuantGroupTerms t = quant_gemm_group_terms(a, p, g, m0);
    switch (p.cols / 16) {
      case 4: scaled_rows<4>(rows, xg, a.K, wg, G / 2, t, y, a.N); break;
      case 3: scaled_rows<3>(rows, xg, a.K, wg, G / 2, t, y, a.N); break;
      case 2: scaled_rows<2>(rows, xg, a.K, wg, G / 2, t, y, a.N); break;
      default: scaled_rows<1>(rows, xg, a.K, wg, G / 2, t, y, a.N); break;
    }
  }
}

void quant_gemm_avx512(const QuantMatmulArgs& a, const bf16_t* xb, int64_t n0, int64_t n1, void* scratch) {
  // The whole panel is widened once, then every block of rows of x runs through
  // all groups while its rows of y stay in cache. (Group by group over all of
  // x instead re-read y once per group: with y's rows N floats apart, a
  // multiple of 4 KiB, they share cache sets, and y went out to L3 each time.)
  const QuantGemmPanel p = quant_gemm_panel(a, n0, n1, scratch);
  for (int64_t m0 = 0; m0 < a.M; m0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, a.M - m0);
    quant_gemm_start_rows(a, p, m0, rows);
    quant_gemm_add_rows_avx512(a, xb, p, m0, rows);
  }
}

}  // namespace fathom::cpu
