// Matmuls and table lookups over MLX affine-quantized weights on the GPU:
// codes packed little-endian into u32 words along each row, a scale and a
// bias per group of 32, 64 or 128 values (value = scale·q + bias in f32).
//
// Decode steps (up to cuda_memory::affine_gemv_max_rows rows of x) read the
// packed codes directly: their floor is the weight bytes a step reads, and a
// 4-bit weight is a quarter of a bf16 one. 4- and 8-bit codes in bf16
// compute go to the tensor cores (one row affine_plane_gemv.cu, on the
// integer ones; two rows of wide groups affine_direct_gemv.cu; the rest
// affine_mma_gemv.cu), the rest to the CUDA-core kernel here. Per
// group, y += scale·Σ x·q + bias·Σ x,
// so the codes are multiplied as the small integers they are. Longer steps
// widen a panel of weight rows at a time into scratch and hand it to cuBLAS,
// so a prefill chunk reuses each widened panel for all its rows: the f32
// values for f32 compute, and for bf16 compute each value split into two
// bf16 halves whose products with bf16 x are exact (two bf16 GEMMs at the
// tensor cores' pace instead of one f32 GEMM at a tenth of it). Either way W
// is scale·q + bias in f32, as on the CPU; bf16 compute rounds only x.
#include <algorithm>

#include "backend/cuda/affine_launch.h"
#include "backend/cuda/bf16_vectors.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {

using affine::block_output;
using affine::Launch;
using affine::Output;
using affine::param_at;
using affine::param_type;
using affine::ParamType;

// A unit is 32 consecutive values of a row: `Bits` words of codes, inside one
// group (groups are 32-128 values). A row is K·Bits/32 words with K a
// multiple of 32, so a unit starts at a multiple of 4·Bits bytes: 16-byte
// loads for 4 and 8 bits, 8-byte loads for 2 and 6, words for 3 and 5.
template <int Bits>
__device__ __forceinline__ void load_unit(const uint32_t* p, uint32_t (&w)[Bits]) {
  if constexpr (Bits % 4 == 0) {
#pragma unroll
    for (int i = 0; i < Bits / 4; ++i) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i);
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (Bits % 2 == 0) {
#pragma unroll
    for (int i = 0; i < Bits / 2; ++i) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(p) + i);
      w[2 * i] = v.x, w[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < Bits; ++i) w[i] = __ldg(p + i);
  }
}

// A float whose bits are 2^23's exponent over an integer v < 2^23 in its
// mantissa, less 2^23: exactly v.
__device__ __forceinline__ float mantissa_value(uint32_t bits) { return __uint_as_float(bits) - 8388608.0f; }

// Code i of a unit as a float (i is a constant once the caller's loop is
// unrolled, so the shifts are immediates), through mantissa_value: cheaper
// than a conversion. A code may straddle two words (3, 5 and 6 bits).
template <int Bits>
__device__ __forceinline__ float code_at(const uint32_t (&w)[Bits], int i) {
  constexpr uint32_t kMask = (1u << Bits) - 1u;
  const int bit = i * Bits, word = bit / 32, shift = bit % 32;
  uint32_t q = w[word] >> shift;
  if (shift + Bits > 32) q |= w[word + 1 < Bits ? word + 1 : word] << (32 - shift);
  return mantissa_value((q & kMask) | 0x4b000000u);
}

// Σ x[i]·q[i] over a unit's 32 codes.
template <int Bits>
__device__ __forceinline__ float dot_unit(const float (&x)[32], const uint32_t (&w)[Bits]) {
  float even = 0.0f, odd = 0.0f;  // two chains: the FMAs' latency overlaps
#pragma unroll
  for (int i = 0; i < 32; i += 2) {
    even = fmaf(x[i], code_at<Bits>(w, i), even);
    odd = fmaf(x[i + 1], code_at<Bits>(w, i + 1), odd);
  }
  return even + odd;
}

// x's 32 values of unit u (16-byte aligned: K is a multiple of 32), rounded
// to bf16 values when asked, and their sum.
__device__ __forceinline__ float load_x_unit(const float* row, int64_t u, bool round, float (&v)[32]) {
  const float4* p = reinterpret_cast<const float4*>(row) + u * 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float4 a = __ldg(p + j);
    v[4 * j] = a.x, v[4 * j + 1] = a.y, v[4 * j + 2] = a.z, v[4 * j + 3] = a.w;
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    if (round) v[i] = round_bf16(v[i]);
    sum += v[i];
  }
  return sum;
}

constexpr int kGemvWarps = 4;  // warps per block
// Output columns per warp: each lane's x values serve that many weight rows
// (x comes from L1; at 4 bits one x value per weight value would be as many
// bytes as the codes themselves).
constexpr int columns_per_warp(int bits) { return bits <= 4 ? 4 : 2; }

// y[m, n] = Σ_k x[m, k]·(scale·q + bias) for m < M ≤ Rows: a warp takes
// columns_per_warp(Bits) columns n, its lanes units of 32 values along K.
// (The fastest of five layouts measured, and still far from the memory's
// pace: bench/RESULTS.md, "On the GPU".)
template <int Bits, int Rows>
__global__ void __launch_bounds__(32 * kGemvWarps)
    affine_gemv_kernel(const __grid_constant__ Launch launch, const float* __restrict__ x, int64_t M, int64_t K,
                       bool round_x) {
  await_previous_kernel();
  constexpr int C = columns_per_warp(Bits);
  int64_t first;
  const Output o = block_output(launch, blockIdx.x, first);
  const int lane = threadIdx.x % 32;
  const int64_t n0 = ((int64_t(blockIdx.x) - first) * kGemvWarps + threadIdx.x / 32) * C;
  if (n0 >= o.n) return;
  const int64_t units = K / 32, words = units * Bits, groups = K / o.group;
  // Columns past the end read the last one again and are not written.
  int64_t col[C];
#pragma unroll
  for (int c = 0; c < C; ++c) col[c] = n0 + c < o.n ? n0 + c : o.n - 1;
  float acc[Rows][C];
#pragma unroll
  for (int m = 0; m < Rows; ++m)
#pragma unroll
    for (int c = 0; c < C; ++c) acc[m][c] = 0.0f;
  for (int64_t u = lane; u < units; u += 32) {
    uint32_t w[C][Bits];
    float scale[C], bias[C];
    const int64_t g = u * 32 / o.group;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      load_unit<Bits>(o.codes + col[c] * words + u * Bits, w[c]);
      scale[c] = param_at(o.scales, o.params, col[c] * groups + g);
      bias[c] = param_at(o.biases, o.params, col[c] * groups + g);
    }
#pragma unroll
    for (int m = 0; m < Rows; ++m) {
      if (m >= M) break;
      float xv[32];
      const float sum = load_x_unit(x + m * K, u, round_x, xv);
#pragma unroll
      for (int c = 0; c < C; ++c) acc[m][c] = fmaf(scale[c], dot_unit<Bits>(xv, w[c]), fmaf(bias[c], sum, acc[m][c]));
    }
  }
#pragma unroll
  for (int m = 0; m < Rows; ++m) {
    if (m >= M) break;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      float v = acc[m][c];
      for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
      if (lane == 0 && n0 + c < o.n) o.y[m * o.n + n0 + c] = v + (o.bias ? o.bias[n0 + c] : 0.0f);
    }
  }
}

__device__ __forceinline__ void store_unit(float* out, float*, const float (&v)[32]) {
#pragma unroll
  for (int j = 0; j < 8; ++j)
    reinterpret_cast<float4*>(out)[j] = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
}

// 8 values as bf16 into a 16-byte store.
__device__ __forceinline__ uint4 pack_bf16x8(const float* v) {
  uint32_t packed[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    packed[i] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  return make_uint4(packed[0], packed[1], packed[2], packed[3]);
}

// Each value v as two bf16 values, hi = bf16(v) and lo = bf16(v − hi):
// hi + lo is v to within 2^-17 of it, and x·hi + x·lo are exact f32
// products for a bf16 x, so two bf16 GEMMs multiply the f32 values.
__device__ __forceinline__ void store_unit(__nv_bfloat16* hi, __nv_bfloat16* lo, const float (&v)[32]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float h[8], l[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      h[i] = __bfloat162float(__float2bfloat16_rn(v[8 * j + i]));
      l[i] = v[8 * j + i] - h[i];
    }
    reinterpret_cast<uint4*>(hi)[j] = pack_bf16x8(h);
    reinterpret_cast<uint4*>(lo)[j] = pack_bf16x8(l);
  }
}

// out[r, :] = the values of weight row ids[r] (or first + r without ids),
// scale·q + bias in f32: as f32, or split into bf16 halves (out and lo, both
// [rows, K]). A thread per unit of 32 values.
template <int Bits, typename Out>
__global__ void affine_rows_kernel(const uint32_t* codes, const void* scales, const void* biases, ParamType params,
                                   int group, int64_t K, const int32_t* ids, int64_t first, int64_t rows, Out* out,
                                   Out* lo) {
  await_previous_kernel();
  const int64_t units = K / 32, groups = K / group;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * units;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / units, u = i % units, src = ids ? ids[r] : first + r;
    uint32_t w[Bits];
    load_unit<Bits>(codes + src * units * Bits + u * Bits, w);
    const int64_t g = src * groups + u * 32 / group;
    const float scale = param_at(scales, params, g), bias = param_at(biases, params, g);
    float v[32];
#pragma unroll
    for (int j = 0; j < 32; ++j) v[j] = fmaf(code_at<Bits>(w, j), scale, bias);
    store_unit(out + r * K + u * 32, lo ? lo + r * K + u * 32 : nullptr, v);
  }
}

int blocks_for(int64_t n, int threads = 256) {
  return int(std::clamp<int64_t>((n + threads - 1) / threads, 1, 65535));
}

// Calls f with the code width as a constant.
template <typename F>
void with_bits(int bits, F&& f) {
  switch (bits) {
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: fail("affine weights: ", bits, "-bit codes (2, 3, 4, 5, 6 or 8)");
  }
}

}  // namespace

bool CudaBackend::affine_gemv(const Tensor& x, std::span<const MatmulTarget* const> targets, bool bf16_inputs) {
  const int64_t M = x.dim(0), K = x.dim(1);
  bool planes_only = true;
  // One launch per run of up to affine::kOutputs targets of one code width
  // (and, on the tensor cores, one group size).
  for (size_t first = 0; first < targets.size();) {
    const AffineQuant& q = targets[first]->w->affine_quant();
    const bool mma = affine_mma_suits(M, *targets[first]->w, bf16_inputs);
    const bool plane = mma && affine_plane_suits(M, K, q.bits, q.group_size);
    const bool direct = mma && !plane && affine_direct_suits(M, K, q.bits, q.group_size);
    size_t next = first + 1;
    while (next < targets.size() && next - first < size_t(affine::kOutputs)) {
      const AffineQuant& n = targets[next]->w->affine_quant();
      if (n.bits != q.bits || (mma && n.group_size != q.group_size) ||
          ((direct || plane) && n.scales.dtype() != q.scales.dtype()))
        break;
      ++next;
    }
    const std::span<const MatmulTarget* const> run = targets.subspan(first, next - first);
    first = next;
    if (plane) {
      affine_plane_gemv(x.data<float>(), M, K, run);
      continue;
    }
    planes_only = false;
    if (direct) {
      affine_direct_gemv(x.data<float>(), M, K, run);
      continue;
    }
    if (mma) {
      affine_mma_gemv(x.data<float>(), M, K, run);
      continue;
    }
    check(M <= cuda_memory::kAffineGemvMaxRows, "matmul: the quantized GEMV takes at most ",
          cuda_memory::kAffineGemvMaxRows, " rows of ", q.bits, "-bit codes, got ", M);
    Launch args{};
    for (const MatmulTarget* t : run) affine::add_output(args, *t, kGemvWarps * columns_per_warp(q.bits));
    const dim3 grid(unsigned(args.first_block[args.count])), block(32 * kGemvWarps);
    with_bits(q.bits, [&](auto b) {
      constexpr int B = decltype(b)::value;
      if (M == 1) launch("matmul: quantized gemv", affine_gemv_kernel<B, 1>, grid, block, 0, args, x.data<float>(), M, K,
                         bf16_inputs);
      else launch("matmul: quantized gemv", affine_gemv_kernel<B, cuda_memory::kAffineGemvMaxRows>, grid, block, 0, args,
                  x.data<float>(), M, K, bf16_inputs);
    });
  }
  return planes_only;
}

void CudaBackend::affine_panels(const MatmulTarget& t, int64_t M, int64_t K, const void* xs, bool bf16_inputs) {
  const Tensor& w = *t.w;
  const AffineQuant& q = w.affine_quant();
  affine::check_codes_aligned(w, "matmul");
  const int64_t N = w.dim(0), panel_bytes = cuda_memory::dequant_panel_bytes(N, K);
  const int64_t rows = panel_bytes / (K * 4);
  void* panel = scratch(kDequantPanel, size_t(panel_bytes));
  float* y = t.y->data<float>();
  for (int64_t n0 = 0; n0 < N; n0 += rows) {
    const int64_t r = std::min(rows, N - n0);
    auto* hi = static_cast<__nv_bfloat16*>(panel);
    with_bits(q.bits, [&](auto b) {
      constexpr int B = decltype(b)::value;
      const int grid = blocks_for(r * K / 32);
      if (bf16_inputs)
        launch("matmul: widen quantized rows", affine_rows_kernel<B, __nv_bfloat16>, grid, 256, 0, w.data<uint32_t>(),
               q.scales.raw(), q.biases.raw(), param_type(q.scales.dtype()), q.group_size, K, nullptr, n0, r, hi,
               hi + r * K);
      else
        launch("matmul: widen quantized rows", affine_rows_kernel<B, float>, grid, 256, 0, w.data<uint32_t>(),
               q.scales.raw(), q.biases.raw(), param_type(q.scales.dtype()), q.group_size, K, nullptr, n0, r,
               static_cast<float*>(panel), static_cast<float*>(nullptr));
    });
    if (bf16_inputs) {
      // x·hi, then + x·lo: bf16 products exact in f32, f32 sums.
      gemm(hi, xs, CUDA_R_16BF, M, r, K, y + n0, N, false);
      gemm(hi + r * K, xs, CUDA_R_16BF, M, r, K, y + n0, N, true);
    } else {
      gemm(panel, xs, CUDA_R_32F, M, r, K, y + n0, N, false);
    }
  }
}

void CudaBackend::affine_embedding(const Tensor& table, const int32_t* ids, int64_t n, Tensor& out) {
  const AffineQuant& q = table.affine_quant();
  affine::check_codes_aligned(table, "embedding");
  const int64_t d = table.dim(1);
  with_bits(q.bits, [&](auto b) {
    constexpr int B = decltype(b)::value;
    launch("embedding: quantized rows", affine_rows_kernel<B, float>, blocks_for(n * d / 32), 256, 0,
           table.data<uint32_t>(), q.scales.raw(), q.biases.raw(), param_type(q.scales.dtype()), q.group_size, d, ids,
           int64_t(0), n, out.data<float>(), static_cast<float*>(nullptr));
  });
}

}  // namespace fathom::cuda
