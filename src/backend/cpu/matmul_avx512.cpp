// AVX-512 build of the blocked matmul (compiled with -mavx512f -mavx512bw
// -mavx512bf16). bf16 compute uses vdpbf16ps: 32 bf16 products per instruction,
// summed in pairs into f32.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

template <typename WT>
struct DotF32 {
  using X = float;
  using W = WT;
  using acc = __m512;
  using wreg = __m512;
  static constexpr int step = 16;
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
  static acc zero() { return _mm512_setzero_ps(); }
  static __m512bh load_x(const bf16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static wreg load_w(const bf16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static acc madd(__m512bh x, wreg w, acc a) { return _mm512_dpbf16_ps(a, x, w); }
  static float hsum(acc a) { return _mm512_reduce_add_ps(a); }
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

void gemm_nn_avx512(const float* x, int64_t ldx, const void* w, DType w_dtype, int64_t ldw, int64_t M, int64_t K,
                 int64_t N, float* y, int64_t ldy) {
  if (w_dtype == DType::bf16)
    gemm_nn<DotF32<bf16_t>>(x, ldx, static_cast<const bf16_t*>(w), ldw, M, K, N, y, ldy);
  else
    gemm_nn<DotF32<float>>(x, ldx, static_cast<const float*>(w), ldw, M, K, N, y, ldy);
}

}  // namespace fathom::cpu
