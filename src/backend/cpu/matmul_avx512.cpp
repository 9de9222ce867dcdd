// AVX-512 build of the blocked matmul (compiled with -mavx512f -mavx512bw
// -mavx512bf16). bf16 compute uses vdpbf16ps: 32 bf16 products per instruction,
// summed in pairs into f32.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>
#include <type_traits>

#include "backend/cpu/codes_avx512.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/pack_pairs_avx512.h"

namespace fathom::cpu {
namespace {

// Horizontal sums of 16 vectors at once: out[i] = Σ lanes of a[i], with
// 15 shuffles-and-adds per level instead of a full reduction per vector.
inline void reduce16_avx512(const __m512* a, float* out) {
  __m512 b[8], c[4];
  for (int i = 0; i < 8; ++i)  // halves of a[2i] and a[2i+1] folded: 8 partials each
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int i = 0; i < 4; ++i)  // 128-bit lane L of c[i] holds 4 partials of a[4i + L]
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(c[0], c[1]), _mm512_unpackhi_ps(c[0], c[1]));
  const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(c[2], c[3]), _mm512_unpackhi_ps(c[2], c[3]));
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  alignas(64) float lanes[16];  // lanes[4L + i] = total of a[4i + L]
  _mm512_store_ps(lanes, r);
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 4; ++l) out[4 * i + l] = lanes[4 * l + i];
}

template <typename WT>
struct DotF32 {
  using X = float;
  using W = WT;
  using acc = __m512;
  using wreg = __m512;
  static constexpr int step = 16;
  static constexpr bool has_reduce16 = true;
  static void reduce16(const __m512* a, float* out) { reduce16_avx512(a, out); }
  static acc zero() { return _mm512_setzero_ps(); }
  static __m512 load_x(const float* p) { return _mm512_loadu_ps(p); }
  static wreg load_w(const float* p) { return _mm512_loadu_ps(p); }
  static wreg load_w(const bf16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static acc madd(__m512 x, wreg w, acc a) { return _mm512_fmadd_ps(x, w, a); }
  static float hsum(acc a) { return _mm512_reduce_add_ps(a); }
  static __m512 splat(float v) { return _mm512_set1_ps(v); }
  static void store(float* p, acc a) { _mm512_storeu_ps(p, a); }
};

struct DotBf16 {
  using X = bf16_t;
  using W = bf16_t;
  using acc = __m512;
  using wreg = __m512bh;
  static constexpr int step = 32;
  static constexpr bool has_reduce16 = true;
  static void reduce16(const __m512* a, float* out) { reduce16_avx512(a, out); }
  static acc zero() { return _mm512_setzero_ps(); }
  static __m512bh load_x(const bf16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static wreg load_w(const bf16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static acc madd(__m512bh x, wreg w, acc a) { return _mm512_dpbf16_ps(a, x, w); }
  static float hsum(acc a) { return _mm512_reduce_add_ps(a); }
  // Prefill's pair kernel (pair_matmul): x[k], x[k + 1] in every 32-bit lane.
  static __m512bh splat_pair(const bf16_t* p) {
    int32_t both;
    std::memcpy(&both, p, sizeof(both));
    return (__m512bh)_mm512_set1_epi32(both);
  }
  static void pack_pairs16(const bf16_t* w, int64_t ldw, bf16_t* out, int64_t ldp) {
    pack_pairs16_avx512(w, ldw, out, ldp);
  }
  static acc load_acc(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, acc a) { _mm512_storeu_ps(p, a); }
};

}  // namespace

#include "backend/cpu/matmul_simd.inc"

void matmul_slice_avx512(const MatmulArgs& a, int64_t n0, int64_t n1) {
  if (a.w_dtype == DType::bf16 && a.xb)
    blocked_matmul<DotBf16>(a, a.xb, static_cast<const bf16_t*>(a.w), n0, n1);
  else if (a.w_dtype == DType::bf16)
    blocked_matmul<DotF32<bf16_t>>(a, a.x, static_cast<const bf16_t*>(a.w), n0, n1);
  else
    blocked_matmul<DotF32<float>>(a, a.x, static_cast<const float*>(a.w), n0, n1);
}


void gemm_pv_avx512(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n, int64_t d,
                    float* y, int64_t ldy, bf16_t* panel) {
  // The pair kernel over v interleaved into panels of 64 (or 32) columns.
  const int64_t pairs = (n + 1) / 2, cols = d % 64 == 0 ? 64 : 32;
  pack_row_pairs_avx512(v, ldv, n, d, pairs, cols, panel);
  for (int64_t c0 = 0; c0 < d; c0 += cols) {
    const bf16_t* wp = panel + c0 / cols * pairs * cols * 2;
    if (cols == 64)
      pair_rows_at<DotBf16, 4>(p, ldp, M, wp, pairs, y + c0, ldy);
    else
      pair_rows_at<DotBf16, 2>(p, ldp, M, wp, pairs, y + c0, ldy);
  }
}

void gemm_qk_avx512(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk, int64_t n,
                    float* s, int64_t lds) {
  // Lanes are the 16 queries; each key pair is broadcast: 16 keys' sums at
  // once (16 accumulators hide the multiply-add latency), then transposed.
  alignas(64) bf16_t qp[512 * 16];
  pack_query_pairs(q, ldq, rows, d, qp);
  const int64_t pairs = d / 2;
  auto key_pair = [&](int64_t j, int64_t p) {
    int32_t both;
    std::memcpy(&both, k + j * ldk + 2 * p, sizeof(both));
    return (__m512bh)_mm512_set1_epi32(both);
  };
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 acc[16];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      const __m512bh w = (__m512bh)_mm512_load_si512(qp + p * 32);
      for (int r = 0; r < 16; ++r) acc[r] = _mm512_dpbf16_ps(acc[r], key_pair(j + r, p), w);
    }
    alignas(64) float block[16][16];
    for (int r = 0; r < 16; ++r) _mm512_store_ps(block[r], acc[r]);
    store_transposed16(block, rows, s + j, lds);
  }
  for (; j < n; ++j) {  // the last few keys one at a time
    __m512 acc = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p)
      acc = _mm512_dpbf16_ps(acc, key_pair(j, p), (__m512bh)_mm512_load_si512(qp + p * 32));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc);
    for (int64_t r = 0; r < rows; ++r) s[r * lds + j] = lanes[r];
  }
}

void dequant_affine_row_avx512(const uint32_t* codes, const void* scales, const void* biases, DType params, int bits,
                               int group, int64_t dim, float* out) {
  const int64_t simd = group % 16 == 0 ? simd_codes(bits, dim) : 0;
  for (int64_t i = 0; i < simd; i += 16) {
    const __m512 s = _mm512_set1_ps(param_at(scales, params, i / group));
    const __m512 b = _mm512_set1_ps(param_at(biases, params, i / group));
    _mm512_storeu_ps(out + i, _mm512_fmadd_ps(_mm512_cvtepi32_ps(codes16(codes, bits, i)), s, b));
  }
  for (int64_t i = simd; i < dim; ++i)
    out[i] = std::fma(float(code_at(codes, bits, i)), param_at(scales, params, i / group),
                      param_at(biases, params, i / group));
}

void dequant_table_row_avx512(const uint32_t* codes, int bits, const float* table, int64_t dim, float* out) {
  alignas(64) float padded[16] = {};
  for (int c = 0; c < (1 << bits); ++c) padded[c] = table[c];
  const __m512 lookup = _mm512_load_ps(padded);
  const int64_t simd = simd_codes(bits, dim);
  for (int64_t i = 0; i < simd; i += 16)
    _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(codes16(codes, bits, i), lookup));
  for (int64_t i = simd; i < dim; ++i) out[i] = table[code_at(codes, bits, i)];
}

namespace {

// exp(x) for x ≤ 0 (softmax after subtracting the max): x = n·ln2 + r with
// |r| ≤ ln2/2, e^r by a degree-6 Taylor polynomial (error < 2e-7 relative),
// 2^n through the exponent bits; inputs below −87 give 0.
inline __m512 exp_nonpositive(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f), ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// exp(x) in double for x ≤ 0: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 in two
// parts), e^r by its Taylor polynomial to r^12 (truncation < 2e-16 relative),
// 2^n by scalef (denormal results as std::exp gives them; 0 below −745).
inline __m512d exp_nonpositive_pd(__m512d x) {
  x = _mm512_max_pd(x, _mm512_set1_pd(-746.0));
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93147180369123816490e-01), x);
  r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.90821492927058770002e-10), r);
  constexpr double kInverseFactorial[13] = {1.0,          1.0,           1.0 / 2,        1.0 / 6,      1.0 / 24,
                                             1.0 / 120,    1.0 / 720,     1.0 / 5040,     1.0 / 40320,  1.0 / 362880,
                                             1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600};
  __m512d p = _mm512_set1_pd(kInverseFactorial[12]);
  for (int k = 11; k >= 0; --k) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(kInverseFactorial[k]));
  return _mm512_scalef_pd(p, n);
}

}  // namespace

double exp_weights_avx512(const float* x, float max, int64_t n, double* out) {
  const __m512 m = _mm512_set1_ps(max);
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // The difference in f32, as the reference takes it, then widened.
    const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), m);
    const __m512d lo = exp_nonpositive_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(d)));
    const __m512d hi = exp_nonpositive_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1))));
    _mm512_storeu_pd(out + i, lo);
    _mm512_storeu_pd(out + i + 8, hi);
    s0 = _mm512_add_pd(s0, lo);
    s1 = _mm512_add_pd(s1, hi);
  }
  double total = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
  for (; i < n; ++i) total += out[i] = std::exp(double(x[i] - max));
  return total;
}

double log_sum_exp_avx512(const float* x, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + j));
  float max_x = _mm512_reduce_max_ps(vmax);
  for (; j < n; ++j) max_x = std::max(max_x, x[j]);
  if (std::isinf(max_x)) return max_x;
  // Each lane adds at most kBlock / 16 terms ≤ 1 in f32 before the block's sum
  // moves into a double: ~1e-6 relative over a 256k vocabulary.
  constexpr int64_t kBlock = 4096;
  const __m512 m = _mm512_set1_ps(max_x);
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    j = b;
    for (; j + 32 <= end; j += 32) {
      s0 = _mm512_add_ps(s0, exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + j), m)));
      s1 = _mm512_add_ps(s1, exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), m)));
    }
    for (; j < end; j += 16) {
      const __mmask16 tail = end - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (end - j)) - 1);
      const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + j), m));
      s0 = _mm512_add_ps(s0, _mm512_maskz_mov_ps(tail, e));
    }
    total += double(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
  }
  return std::log(total) + max_x;
}

void softmax_row_avx512(float* x, int64_t n, int64_t first, int64_t last) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  int64_t j = first;
  for (; j + 16 <= last + 1; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + j));
  float max_score = _mm512_reduce_max_ps(vmax);
  for (; j <= last; ++j) max_score = std::max(max_score, x[j]);
  std::fill(x, x + first, 0.0f);
  std::fill(x + last + 1, x + n, 0.0f);
  const __m512 m = _mm512_set1_ps(max_score);
  __m512 vsum = _mm512_setzero_ps();
  j = first;
  for (; j + 16 <= last + 1; j += 16) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + j), m));
    _mm512_storeu_ps(x + j, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (j <= last) {
    const __mmask16 tail = __mmask16((1u << (last + 1 - j)) - 1);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + j), m));
    _mm512_mask_storeu_ps(x + j, tail, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(tail, e));
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  j = first;
  for (; j + 16 <= last + 1; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), inv));
  if (j <= last) {
    const __mmask16 tail = __mmask16((1u << (last + 1 - j)) - 1);
    _mm512_mask_storeu_ps(x + j, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + j), inv));
  }
}

void silu_mul_avx512(const float* gate, const float* up, float* out, int64_t i0, int64_t i1) {
  // silu(g) = g·σ(g) with σ from e = exp(−|g|) ≤ 1: 1/(1+e) for g ≥ 0, e/(1+e) below.
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  int64_t i = i0;
  for (; i + 16 <= i1; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(zero, _mm512_abs_ps(g)));
    const __m512 num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(g, zero, _CMP_GE_OQ), e, one);
    const __m512 sigmoid = _mm512_div_ps(num, _mm512_add_ps(one, e));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(g, sigmoid), _mm512_loadu_ps(up + i)));
  }
  silu_mul_range(gate, up, out, i, i1);
}

void gelu_tanh_mul_avx512(const float* gate, const float* up, float* out, int64_t i0, int64_t i1) {
  // 0.5·(1 + tanh(u)) = σ(2u), u = √(2/π)·(g + 0.044715·g³); σ as in silu_mul_avx512.
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  const __m512 two_c = _mm512_set1_ps(2.0f * 0.7978845608028654f), cubic = _mm512_set1_ps(0.044715f);
  int64_t i = i0;
  for (; i + 16 <= i1; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 z = _mm512_mul_ps(two_c, _mm512_fmadd_ps(_mm512_mul_ps(cubic, g), _mm512_mul_ps(g, g), g));
    const __m512 e = exp_nonpositive(_mm512_sub_ps(zero, _mm512_abs_ps(z)));
    const __m512 num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(z, zero, _CMP_GE_OQ), e, one);
    const __m512 sigmoid = _mm512_div_ps(num, _mm512_add_ps(one, e));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(g, sigmoid), _mm512_loadu_ps(up + i)));
  }
  gelu_tanh_mul_range(gate, up, out, i, i1);
}

void to_bf16_avx512(const float* src, int64_t n, bf16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void gemm_nn_avx512(const float* x, int64_t ldx, const void* w, DType w_dtype, int64_t ldw, int64_t M, int64_t K,
                 int64_t N, float* y, int64_t ldy) {
  if (w_dtype == DType::bf16)
    gemm_nn<DotF32<bf16_t>>(x, ldx, static_cast<const bf16_t*>(w), ldw, M, K, N, y, ldy);
  else
    gemm_nn<DotF32<float>>(x, ldx, static_cast<const float*>(w), ldw, M, K, N, y, ldy);
}

#include "backend/cpu/attention_decode_avx512.inc"

}  // namespace fathom::cpu
