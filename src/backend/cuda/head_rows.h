#pragma once
// What the kernels that turn attention's heads share (cuda_ops.cu's RoPE,
// cuda_kv.cu's RoPE with the KV write): q and k as one set of head
// vectors, a block's sum, a block's threads for a row, and one head vector
// normed and turned by a block. Device code: for .cu files only.
#include <algorithm>
#include <cstdint>

#include "backend/backend.h"

namespace fathom::cuda {

// Attention's q and k [T, heads, head_dim] as one set of head vectors:
// vector `row` of q's T · q_heads, then of k's (k null: q's alone). The
// rows, the weight of the vector's norm, and its token's index.
struct HeadRows {
  float* q;
  const float* q_norm;
  int64_t q_heads;
  float* k;
  const float* k_norm;
  int64_t k_heads;
  int64_t t;

  __device__ float* at(int64_t row, int64_t head_dim, const float*& w, int64_t& token) const {
    if (row < t * q_heads) {
      w = q_norm, token = row / q_heads;
      return q + row * head_dim;
    }
    row -= t * q_heads;
    w = k_norm, token = row / k_heads;
    return k + row * head_dim;
  }
  __host__ __device__ int64_t rows() const { return t * (q_heads + k_heads); }
};

// A step's q and k [T, heads, head_dim] with their norms (none where the
// model has none), as one set of head vectors.
inline HeadRows qk_rows(Tensor& q, Tensor& k, const Backend::QkNorms& norms) {
  return {q.data<float>(), norms.q ? norms.q->data<float>() : nullptr, q.dim(1), k.data<float>(),
          norms.k ? norms.k->data<float>() : nullptr, k.dim(1), q.dim(0)};
}

// Threads of a block that takes a row of d values (block_sum's limits).
inline int row_threads(int64_t d) { return int(std::min<int64_t>(1024, std::max<int64_t>(32, (d + 31) / 32 * 32))); }

// Sum over the block (blockDim.x a multiple of 32, at most 1024).
__device__ inline float block_sum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial may still be read from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) total += partial[w];
  return total;
}

// Head vector xr of token ti turned in place by the block: normed first
// where w is set (x / rms(x) · w, as rms_norm_rows), then rotated as
// rope_rows does (HF rotate_half over the first 2 · half features).
// normed: head_dim floats of shared memory.
__device__ inline void norm_rope_head(float* xr, const float* w, float eps, const float* cos, const float* sin,
                                      int64_t ti, int64_t head_dim, int64_t half, float* normed) {
  float inv = 1.0f;
  if (w) {
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) ss += xr[i] * xr[i];
    inv = 1.0f / sqrtf(block_sum(ss) / float(head_dim) + eps);
  }
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) normed[i] = w ? w[i] * (xr[i] * inv) : xr[i];
  __syncthreads();
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    if (i >= 2 * half) {
      xr[i] = normed[i];
      continue;
    }
    const int64_t j = i < half ? i : i - half;
    const float c = cos[ti * half + j], s = sin[ti * half + j];
    const float a = normed[j], b = normed[j + half];
    xr[i] = i < half ? a * c - b * s : b * c + a * s;
  }
}

}  // namespace fathom::cuda
