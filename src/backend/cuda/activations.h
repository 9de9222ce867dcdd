#pragma once
// The gate activations of the CUDA kernels, in f32 as the CPU's ops compute
// them. Device code: for .cu files only.
#include <cuda_runtime.h>

namespace fathom::cuda {

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float siluf(float x) { return x / (1.0f + expf(-x)); }
// PyTorch's GELU with approximate="tanh".
__device__ __forceinline__ float gelu_tanhf(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

}  // namespace fathom::cuda
