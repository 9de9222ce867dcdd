// Decode's matmuls: y[N] = w[N, K] · x[K] for one row of x and bf16 weights,
// reading each weight byte once at the memory's pace. cuBLAS's GEMM
// for one row does not come close (see bench/RESULTS.md). The outputs of one
// x (q/k/v, gate/up) go in one launch: a decode step is a chain of small
// kernels, and each launch removed is a few microseconds of it.
#include "backend/cuda/bf16_vectors.h"
#include "backend/cuda/cuda_backend.h"

namespace fathom::cuda {
namespace {

constexpr int kGemvWarps = 8;    // output columns per block, one per warp
constexpr int kGemvUnroll = 4;   // 16-byte loads in flight per lane
constexpr int kGemvOutputs = 4;  // outputs per launch

struct GemvOutputArgs {
  const uint4* w;
  const float* bias;  // or null
  float* y;
  int64_t n;
};

// The outputs of one launch: blocks [first_block[i], first_block[i + 1]) compute output i.
struct GemvLaunch {
  GemvOutputArgs out[kGemvOutputs];
  int64_t first_block[kGemvOutputs + 1];
  int count;
};

// x's 8 values at chunk c, rounded to bf16 as the bf16
// products see them (no separate rounding pass).
__device__ __forceinline__ void load_x8(const float* row, int64_t c, float out[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(row) + 2 * c);
  const float4 b = __ldg(reinterpret_cast<const float4*>(row) + 2 * c + 1);
  const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = round_bf16(v[i]);
}

// One warp per output column n; lane l reads 8 consecutive weights at k =
// 8·l + 256·j. K % 8 == 0 and rows 16-byte aligned (checked by the caller).
__global__ void gemv_bf16_kernel(GemvLaunch launch, const float* __restrict__ x, int64_t K) {
  GemvOutputArgs o = launch.out[0];
  int64_t first = 0;
#pragma unroll
  for (int i = 1; i < kGemvOutputs; ++i)
    if (i < launch.count && blockIdx.x >= launch.first_block[i]) o = launch.out[i], first = launch.first_block[i];
  const int lane = threadIdx.x % 32;
  const int64_t n = (int64_t(blockIdx.x) - first) * kGemvWarps + threadIdx.x / 32;
  const uint4* wr = o.w + std::min(n, o.n - 1) * (K / 8);
  const int64_t chunks = K / 8;  // 16-byte chunks per weight row
  // The first loads' weights asked of L2 while the kernel before this one
  // finishes (x is its output; kernel_overlap.h).
#pragma unroll
  for (int u = 0; u < kGemvUnroll; ++u)
    if (lane + 32 * u < chunks) asm volatile("prefetch.global.L2 [%0];" ::"l"(wr + lane + 32 * u));
  await_previous_kernel();
  if (n >= o.n) return;
  float acc = 0.0f;
  int64_t c = lane;
  for (; c + 32 * (kGemvUnroll - 1) < chunks; c += 32 * kGemvUnroll) {
    uint4 wv[kGemvUnroll];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) wv[u] = __ldg(wr + c + 32 * u);
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      float wf[8], xf[8];
      widen_bf16x8(wv[u], wf);
      load_x8(x, c + 32 * u, xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc = fmaf(wf[i], xf[i], acc);
    }
  }
  for (; c < chunks; c += 32) {
    float wf[8], xf[8];
    widen_bf16x8(__ldg(wr + c), wf);
    load_x8(x, c, xf);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc = fmaf(wf[i], xf[i], acc);
  }
  for (int s = 16; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
  if (lane == 0) o.y[n] = acc + (o.bias ? o.bias[n] : 0.0f);
}

}  // namespace

bool CudaBackend::gemv_suits(int64_t M, int64_t K, const Tensor& w) {
  return M <= kGemvMaxRows && K % 8 == 0 && w.dtype() == DType::bf16 && aligned16(w.raw());
}

void CudaBackend::gemv_bf16(const float* x, int64_t K, std::span<const GemvOutput> outputs) {
  for (size_t first = 0; first < outputs.size(); first += kGemvOutputs) {
    GemvLaunch args{};
    args.count = int(std::min<size_t>(kGemvOutputs, outputs.size() - first));
    for (int i = 0; i < args.count; ++i) {
      const GemvOutput& o = outputs[first + size_t(i)];
      const int64_t n = o.w->dim(0);
      args.out[i] = {static_cast<const uint4*>(o.w->raw()), o.bias, o.y, n};
      args.first_block[i + 1] = args.first_block[i] + (n + kGemvWarps - 1) / kGemvWarps;
    }
    const dim3 grid(unsigned(args.first_block[args.count])), block(32 * kGemvWarps);
    launch("matmul: gemv", gemv_bf16_kernel, grid, block, 0, args, x, K);
  }
}

}  // namespace fathom::cuda
