#pragma once
// Widening packed bf16 values to f32 in registers, for kernels that read
// bf16 rows with vector loads (a bf16 is the top half of an f32). Device
// code: for .cu files only.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace fathom::cuda {

// v rounded to the nearest bf16 value (bf16 compute's rounding of x), as f32.
__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// The 2 bf16 values of a 32-bit word, the first in its low half.
__device__ __forceinline__ void widen_bf16x2(uint32_t word, float out[2]) {
  out[0] = __uint_as_float(word << 16);
  out[1] = __uint_as_float(word & 0xffff0000u);
}

// The 8 bf16 values of a 16-byte load.
__device__ __forceinline__ void widen_bf16x8(const uint4& v, float out[8]) {
  widen_bf16x2(v.x, out);
  widen_bf16x2(v.y, out + 2);
  widen_bf16x2(v.z, out + 4);
  widen_bf16x2(v.w, out + 6);
}

// N consecutive bf16 values (N = 2, 4 or 8) from one load of 4, 8 or 16
// bytes (p aligned to it).
template <int N>
__device__ __forceinline__ void load_bf16(const void* p, float out[N]) {
  static_assert(N == 2 || N == 4 || N == 8);
  if constexpr (N == 8) {
    widen_bf16x8(*static_cast<const uint4*>(p), out);
  } else if constexpr (N == 4) {
    const uint2 v = *static_cast<const uint2*>(p);
    widen_bf16x2(v.x, out);
    widen_bf16x2(v.y, out + 2);
  } else {
    widen_bf16x2(*static_cast<const uint32_t*>(p), out);
  }
}

}  // namespace fathom::cuda
