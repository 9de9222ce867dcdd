#include "backend/cpu/elementwise.h"

#include <cmath>
#include <cstring>

namespace fathom::cpu {

void rms_norm_rows(const float* x, const float* w, float eps, int64_t d, int64_t r0, int64_t r1, float* y) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / float(d) + eps);
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yr[i] = w[i] * (xr[i] * inv);
  }
}

void rope_rows(float* x, const float* cos, const float* sin, int64_t heads, int64_t head_dim, int64_t half,
               int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

void silu_mul_range(const float* gate, const float* up, float* out, int64_t i0, int64_t i1) {
#pragma omp simd
  for (int64_t i = i0; i < i1; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu_tanh_mul_range(const float* gate, const float* up, float* out, int64_t i0, int64_t i1) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = i0; i < i1; ++i) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
  }
}

void add_range(float* x, const float* y, int64_t i0, int64_t i1) {
#pragma omp simd
  for (int64_t i = i0; i < i1; ++i) x[i] += y[i];
}

void widen_row(const void* src, DType dtype, int64_t n, float* dst) {
  switch (dtype) {
    case DType::f32: std::memcpy(dst, src, size_t(n) * 4); break;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const bf16_t*>(src)[i]);
      break;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const f16_t*>(src)[i]);
      break;
    case DType::i32:
    case DType::u32:
    case DType::affine: break;  // not values a row of floats is widened from (callers check)
  }
}

}  // namespace fathom::cpu
