// Decode's matmuls: y[M, N] = x[M, K] · w[N, K]ᵀ for a few rows of x and bf16
// weights, reading each weight byte once at the memory's pace. cuBLAS's GEMM
// for one row does not come close (see bench/RESULTS.md).
#include "backend/cuda/cuda_backend.h"

namespace fathom::cuda {
namespace {

constexpr int kGemvWarps = 8;   // output columns per block, one per warp
constexpr int kGemvUnroll = 4;  // 16-byte loads in flight per lane

__device__ __forceinline__ void widen8(const uint4& v, float out[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

// One warp per output column n; lane l reads 8 consecutive weights at k =
// 8·l + 256·j. K % 8 == 0 and rows 16-byte aligned (checked by the caller).
template <int M>
__global__ void gemv_bf16_kernel(const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ x,
                                 const float* __restrict__ bias, float* __restrict__ y, int64_t N, int64_t K,
                                 int64_t y_stride) {
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (n >= N) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + n * K);
  const int64_t chunks = K / 8;  // 16-byte chunks per row
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  int64_t c = lane;
  for (; c + 32 * (kGemvUnroll - 1) < chunks; c += 32 * kGemvUnroll) {
    uint4 wv[kGemvUnroll];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) wv[u] = __ldg(wr + c + 32 * u);
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      float wf[8];
      widen8(wv[u], wf);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        widen8(__ldg(reinterpret_cast<const uint4*>(x + m * K) + c + 32 * u), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[m] = fmaf(wf[i], xf[i], acc[m]);
      }
    }
  }
  for (; c < chunks; c += 32) {
    float wf[8];
    widen8(__ldg(wr + c), wf);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float xf[8];
      widen8(__ldg(reinterpret_cast<const uint4*>(x + m * K) + c), xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[m] = fmaf(wf[i], xf[i], acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float v = acc[m];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) y[m * y_stride + n] = v + (bias ? bias[n] : 0.0f);
  }
}

}  // namespace

bool CudaBackend::gemv_bf16(const __nv_bfloat16* x, int64_t M, int64_t K, const Tensor& w, const float* bias,
                            float* y) {
  const int64_t N = w.dim(0);
  if (M > kGemvMaxRows || K % 8 != 0 || reinterpret_cast<uintptr_t>(w.raw()) % 16 != 0) return false;
  const auto* wp = static_cast<const __nv_bfloat16*>(w.raw());
  const dim3 grid(unsigned((N + kGemvWarps - 1) / kGemvWarps)), block(32 * kGemvWarps);
  static constexpr decltype(&gemv_bf16_kernel<1>) kKernels[] = {
      gemv_bf16_kernel<1>, gemv_bf16_kernel<2>, gemv_bf16_kernel<3>, gemv_bf16_kernel<4>,
      gemv_bf16_kernel<5>, gemv_bf16_kernel<6>, gemv_bf16_kernel<7>, gemv_bf16_kernel<8>};
  // Eight rows of x at a time (the accumulators stay in registers).
  for (int64_t m0 = 0; m0 < M; m0 += 8) {
    const __nv_bfloat16* xs = x + m0 * K;
    float* ys = y + m0 * N;
    launch("matmul: gemv", kKernels[std::min<int64_t>(8, M - m0) - 1], grid, block, 0, wp, xs, bias, ys, N, K, N);
  }
  return true;
}

}  // namespace fathom::cuda
