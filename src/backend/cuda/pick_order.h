#pragma once
// What the draw kernels (pick_rows.cu, pick_ranked.cu) share: a float's
// order as unsigned bits, and which rules draw in rank order. Device code:
// for .cu files only.
#include <cstdint>

#include "backend/pick_rule.h"

namespace fathom::cuda {

// The float's bits made to order as unsigned: negatives flipped whole,
// positives above them (a NaN's place is the caller's to decide).
__device__ __forceinline__ uint32_t ordered_bits(float v) {
  const uint32_t bits = __float_as_uint(v);
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

// Whether a rule draws from candidates in rank order (top-k or top-p, as
// cpu::pick_candidates does), which pick_ranked.cu's kernel does; the other
// sampled rules are drawn best first, then in id order (pick_rows.cu).
__host__ __device__ inline bool draws_ranked(const PickRule& r, int64_t n) {
  return r.temperature != 0.0f && ((r.top_k > 0 && r.top_k < n) || r.top_p < 1.0f);
}

}  // namespace fathom::cuda
