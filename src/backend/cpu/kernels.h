#pragma once
// CPU kernels. Every fast kernel has a plain reference beside it that the
// tests compare against on random inputs.
#include <cstdint>

#include "backend/backend.h"
#include "core/dtype.h"

namespace fathom::cpu {

// One matmul as the kernels see it: y[M, N] = x[M, K] · w[N, K]ᵀ + bias.
struct MatmulArgs {
  const float* x = nullptr;    // [M, K]; already rounded to bf16 values when xb is set
  const bf16_t* xb = nullptr;  // [M, K] bf16 copy of x for bf16 compute, or null
  const void* w = nullptr;     // [N, K], f32 or bf16
  DType w_dtype = DType::f32;
  const float* bias = nullptr;  // [N] or null
  float* y = nullptr;           // [M, N]
  int64_t M = 0, N = 0, K = 0;
};

// Computes output columns [n0, n1) for every row. Threads split N.
using MatmulSlice = void (*)(const MatmulArgs&, int64_t n0, int64_t n1);

void matmul_slice_reference(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_slice_avx2(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_slice_avx512(const MatmulArgs& a, int64_t n0, int64_t n1);

enum class Isa { portable, avx2, avx512 };
Isa detect_isa();
const char* isa_name(Isa isa);
MatmulSlice matmul_slice_for(Isa isa);

// Attention for query rows [t0, t1) and heads [h0, h1); `scores` is scratch of
// at least kv.length floats. Plain reference and a blocked fast version.
void attention_rows_reference(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p,
                              int64_t t0, int64_t t1, float* out);
void attention_rows(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p, int64_t t0,
                    int64_t t1, int64_t h0, int64_t h1, float* scores, float* out);

}  // namespace fathom::cpu
