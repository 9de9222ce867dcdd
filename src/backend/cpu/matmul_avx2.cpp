// AVX2 + FMA build of the blocked matmul (compiled with -mavx2 -mfma).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <typename WT>
struct DotF32 {
  using X = float;
  using W = WT;
  using acc = __m256;
  using wreg = __m256;
  static constexpr int step = 8;
  static constexpr bool has_reduce16 = false;
  static void reduce16(const __m256*, float*) {}
  static acc zero() { return _mm256_setzero_ps(); }
  static __m256 load_x(const float* p) { return _mm256_loadu_ps(p); }
  static wreg load_w(const float* p) { return _mm256_loadu_ps(p); }
  static wreg load_w(const bf16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static acc madd(__m256 x, wreg w, acc a) { return _mm256_fmadd_ps(x, w, a); }
  static float hsum(acc a) { return hsum256(a); }
  static __m256 splat(float v) { return _mm256_set1_ps(v); }
  static void store(float* p, acc a) { _mm256_storeu_ps(p, a); }
};

}  // namespace

#include "backend/cpu/matmul_simd.inc"

void matmul_slice_avx2(const MatmulArgs& a, int64_t n0, int64_t n1) {
  // bf16 compute has no dot-product instruction here; x already holds the
  // bf16-rounded values, so widening both sides gives the same products.
  if (a.w_dtype == DType::bf16)
    blocked_matmul<DotF32<bf16_t>>(a, a.x, static_cast<const bf16_t*>(a.w), n0, n1);
  else
    blocked_matmul<DotF32<float>>(a, a.x, static_cast<const float*>(a.w), n0, n1);
}

void gemm_nn_avx2(const float* x, int64_t ldx, const void* w, DType w_dtype, int64_t ldw, int64_t M, int64_t K,
                 int64_t N, float* y, int64_t ldy) {
  if (w_dtype == DType::bf16)
    gemm_nn<DotF32<bf16_t>>(x, ldx, static_cast<const bf16_t*>(w), ldw, M, K, N, y, ldy);
  else
    gemm_nn<DotF32<float>>(x, ldx, static_cast<const float*>(w), ldw, M, K, N, y, ldy);
}

}  // namespace fathom::cpu
