#pragma once
// Row-wise CPU kernels; the backend splits rows across threads.
#include <cstdint>

#include "core/dtype.h"

namespace fathom::cpu {

void rms_norm_rows(const float* x, const float* w, float eps, int64_t d, int64_t r0, int64_t r1, float* y);
// x [T, heads, head_dim]; cos/sin [T, half]; rotates dims [0, 2·half) of each head.
void rope_rows(float* x, const float* cos, const float* sin, int64_t heads, int64_t head_dim, int64_t half,
               int64_t t0, int64_t t1);
void silu_mul_range(const float* gate, const float* up, float* out, int64_t i0, int64_t i1);
void gelu_tanh_mul_range(const float* gate, const float* up, float* out, int64_t i0, int64_t i1);
void add_range(float* x, const float* y, int64_t i0, int64_t i1);
void widen_row(const void* src, DType dtype, int64_t n, float* dst);

}  // namespace fathom::cpu
