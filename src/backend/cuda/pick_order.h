#pragma once
// What the draw kernels (pick_rows.cu, pick_ranked.cu) share: a float's
// order as unsigned bits, a block's prefix sum, and which rules draw in rank
// order. Device code: for .cu files only.
#include <cstdint>

#include "backend/pick_rule.h"

namespace fathom::cuda {

// The float's bits made to order as unsigned: negatives flipped whole,
// positives above them (a NaN's place is the caller's to decide).
__device__ __forceinline__ uint32_t ordered_bits(float v) {
  const uint32_t bits = __float_as_uint(v);
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

// A sampled row's value x / t as the host sampler takes it: a NaN as −inf
// (ranked last, by id among the −infs), and its weight exp(y − top) in double
// (0 for a NaN), the host's exp_weights.
__device__ __forceinline__ float sampled_value(float y) { return isnan(y) ? -INFINITY : y; }
__device__ __forceinline__ double draw_weight(float y, float top) { return isnan(y) ? 0.0 : exp(double(y - top)); }

// Exclusive prefix sum of v over a block of `Threads` threads in thread
// order (the sum of the values of the threads before); `total` gets the
// block's sum. `warps` holds a value a warp. Each "before" is a sum, never a
// difference, so that it is exact for integers and for doubles the same
// additions whichever thread asks.
template <int Threads, typename T>
__device__ T block_exclusive_sum(T v, T* warps, T& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  T inclusive = v;
  for (int o = 1; o < 32; o <<= 1) {
    const T up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  T before = __shfl_up_sync(0xffffffffu, inclusive, 1);
  if (lane == 0) before = T(0);
  __syncthreads();  // warps' last readers are done
  if (lane == 31) warps[warp] = inclusive;
  __syncthreads();
  total = T(0);
  for (int w = 0; w < Threads / 32; ++w) {
    if (w < warp) before += warps[w];
    total += warps[w];
  }
  return before;
}

// Whether a rule draws from candidates in rank order (top-k or top-p, as
// cpu::pick_candidates does), which pick_ranked.cu's kernel does; the other
// sampled rules are drawn best first, then in id order (pick_rows.cu).
__host__ __device__ inline bool draws_ranked(const PickRule& r, int64_t n) {
  return r.temperature != 0.0f && ((r.top_k > 0 && r.top_k < n) || r.top_p < 1.0f);
}

}  // namespace fathom::cuda
