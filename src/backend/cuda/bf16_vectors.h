#pragma once
// Widening packed bf16 values to f32 in registers, for kernels that read
// bf16 rows with vector loads (a bf16 is the top half of an f32). Device
// code: for .cu files only.
#include <cstdint>

#include <cuda_runtime.h>

namespace fathom::cuda {

// The 8 bf16 values of a 16-byte load.
__device__ __forceinline__ void widen_bf16x8(const uint4& v, float out[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

}  // namespace fathom::cuda
