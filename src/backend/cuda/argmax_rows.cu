// The greedy pick of every row of a step's logits, on the device: only the
// ids go back to the host, not rows of a whole vocabulary (128k floats a row
// for Llama 3). Each row is cut into spans, one block each, so that a single
// row is read by many multiprocessors; a second kernel takes each row's best
// span. A value and its index travel as one 64-bit key whose order is the
// pick's: the larger value first, then the lower index (cpu::argmax's rule).
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSpan = 4096;  // values of a row a block reads, or more where a row
constexpr int kMaxSpans = 64;    // would take more spans than this

// 0 for a NaN (never picked: every other key is larger); otherwise the
// float's bits made to order as unsigned (negatives flipped whole, positives
// above them) in the high half, and the index counted down in the low half.
__device__ __forceinline__ uint64_t pick_key(float v, int64_t i) {
  if (isnan(v)) return 0;
  const uint32_t bits = __float_as_uint(v);
  const uint32_t ordered = bits & 0x80000000u ? ~bits : bits | 0x80000000u;
  return uint64_t(ordered) << 32 | (0xffffffffu - uint32_t(i));
}

__device__ __forceinline__ uint64_t warp_max(uint64_t k) {
  for (int o = 16; o > 0; o >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, o));
  return k;
}

// Block (s, r): the best key of span s of row r into keys[r · spans + s].
__global__ void argmax_spans_kernel(const float* x, int64_t n, int64_t span, uint64_t* keys) {
  await_previous_kernel();
  const int64_t row = blockIdx.y, begin = int64_t(blockIdx.x) * span, end = std::min(n, begin + span);
  const float* xr = x + row * n;
  uint64_t best = 0;
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) best = max(best, pick_key(xr[i], i));
  __shared__ uint64_t warps[kThreads / 32];
  best = warp_max(best);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = warp_max(threadIdx.x < kThreads / 32 ? warps[threadIdx.x] : 0);
    if (threadIdx.x == 0) keys[row * gridDim.x + blockIdx.x] = best;
  }
}

// A warp per row: the best of its spans' keys, made an index again (a row
// of NaNs picks 0).
__global__ void argmax_pick_kernel(const uint64_t* keys, int spans, int64_t rows, int32_t* ids) {
  await_previous_kernel();
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  uint64_t best = 0;
  for (int s = lane; s < spans; s += 32) best = max(best, keys[row * spans + s]);
  best = warp_max(best);
  if (lane == 0) ids[row] = best == 0 ? 0 : int32_t(0xffffffffu - uint32_t(best));
}

}  // namespace

void CudaBackend::argmax_rows_impl(const Tensor& x, Tensor& ids) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  if (rows == 0) return;
  check(n <= int64_t(INT32_MAX), "argmax_rows: rows of ", n, " values (at most 2^31 - 1)");
  check(rows <= 65535, "argmax_rows: ", rows, " rows at once (at most 65535)");
  const int spans = int(std::min<int64_t>((n + kSpan - 1) / kSpan, kMaxSpans));
  const int64_t span = (n + spans - 1) / spans;
  auto* keys = static_cast<uint64_t*>(scratch(kPartials, size_t(rows * spans) * sizeof(uint64_t)));
  launch("argmax_rows", argmax_spans_kernel, dim3(unsigned(spans), unsigned(rows)), kThreads, 0, x.data<float>(), n,
         span, keys);
  launch("argmax_rows", argmax_pick_kernel, unsigned((rows * 32 + kThreads - 1) / kThreads), kThreads, 0,
         static_cast<const uint64_t*>(keys), spans, rows, ids.data<int32_t>());
}

}  // namespace fathom::cuda
