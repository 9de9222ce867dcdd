#pragma once
// What the quantized-weight GEMVs (affine_matmul.cu, affine_mma_gemv.cu,
// affine_direct_gemv.cu, affine_plane_gemv.cu) share: how scales and biases
// are stored and loaded, codes loaded past L1, and the outputs of one launch
// (q/k/v or gate/up of one x), each a run of blocks. Device code: for .cu
// files only.
#include <atomic>
#include <cstdint>
#include <span>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace fathom::cuda::affine {

// How a tensor of scales or biases stores its values.
enum class ParamType : int { f32, bf16, f16 };

inline ParamType param_type(DType t) {
  switch (t) {
    case DType::f32: return ParamType::f32;
    case DType::bf16: return ParamType::bf16;
    case DType::f16: return ParamType::f16;
    default: fail("affine weights: scales of dtype ", dtype_name(t), " (f32, bf16 or f16)");
  }
}

__device__ __forceinline__ float param_at(const void* p, ParamType type, int64_t i) {
  switch (type) {
    case ParamType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case ParamType::f16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// A parameter's stored bits, loaded now and made a float later (param_value):
// a kernel that loads ahead holds a register, not a stall on the load.
// Both without branches (selects on the launch-wide type): a GEMV converts
// a few a step, and branching cost it more than the conversions.
__device__ __forceinline__ uint32_t param_bits(const void* p, ParamType type, uint32_t i) {
  return type == ParamType::f32 ? static_cast<const uint32_t*>(p)[i] : static_cast<const uint16_t*>(p)[i];
}
__device__ __forceinline__ float param_value(uint32_t bits, ParamType type) {
  const float half = __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  const uint32_t wide = type == ParamType::bf16 ? bits << 16 : bits;
  return type == ParamType::f16 ? half : __uint_as_float(wide);
}

// A scale's or bias's bits: bf16 ones (MLX's usual) without the selects on
// the dtype that other dtypes take (the GEMVs that load codes straight into
// registers, affine_direct_gemv.cu and affine_plane_gemv.cu).
template <bool Bf16Params>
__device__ __forceinline__ uint32_t load_param(const void* p, ParamType type, uint32_t i) {
  if constexpr (Bf16Params) return __ldg(static_cast<const unsigned short*>(p) + i);
  else return param_bits(p, type, i);
}
template <bool Bf16Params>
__device__ __forceinline__ float param_float(uint32_t bits, ParamType type) {
  if constexpr (Bf16Params) return __uint_as_float(bits << 16);
  else return param_value(bits, type);
}

// N words of codes from p (aligned to their size: 1, 2 or a multiple of 4
// words), past L1: codes are read once.
template <int N>
__device__ __forceinline__ void load_codes(const uint32_t* p, uint32_t (&w)[N]) {
  if constexpr (N == 1) {
    asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(w[0]) : "l"(p));
  } else if constexpr (N == 2) {
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
  } else {
    static_assert(N % 4 == 0);
#pragma unroll
    for (int i = 0; i < N; i += 4)
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(w[i]), "=r"(w[i + 1]), "=r"(w[i + 2]), "=r"(w[i + 3])
                   : "l"(p + i));
  }
}

inline constexpr int kOutputs = 4;  // outputs per launch

struct Output {
  const uint32_t* codes;
  const void* scales;
  const void* biases;
  ParamType params;
  int group;
  const float* bias;  // or null
  float* y;           // [M, n]
  int64_t n;
};

// Blocks [first_block[i], first_block[i + 1]) compute output i.
struct Launch {
  Output out[kOutputs];
  int64_t first_block[kOutputs + 1];
  int count;
};

// The kernels' vector loads want a row's words aligned to their width.
inline void check_codes_aligned(const Tensor& w, const char* op) {
  check(reinterpret_cast<uintptr_t>(w.raw()) % 16 == 0, op, ": quantized codes at ", w.raw(),
        " are not 16-byte aligned");
}

// Adds a target whose output columns are taken `per_block` to a block.
inline void add_output(Launch& l, const Backend::MatmulTarget& t, int64_t per_block) {
  const AffineQuant& q = t.w->affine_quant();
  check_codes_aligned(*t.w, "matmul");
  const int64_t n = t.w->dim(0);
  l.out[l.count] = {t.w->data<uint32_t>(), q.scales.raw(), q.biases.raw(), param_type(q.scales.dtype()),
                    q.group_size,          t.bias ? t.bias->data<float>() : nullptr, t.y->data<float>(), n};
  l.first_block[l.count + 1] = l.first_block[l.count] + (n + per_block - 1) / per_block;
  ++l.count;
}

// The outputs of one launch of the GEMVs that load codes into registers
// (`gemv` names which, for errors), in tiles of `per_block` rows: of one
// code width, group and dtype of scales, with group indices that fit the 32
// bits those kernels keep.
inline Launch gather_outputs(std::span<const Backend::MatmulTarget* const> targets, int64_t K, int64_t per_block,
                             const char* gemv) {
  const AffineQuant& q = targets.front()->w->affine_quant();
  Launch l{};
  for (const Backend::MatmulTarget* t : targets) {
    const AffineQuant& tq = t->w->affine_quant();
    check(tq.bits == q.bits && tq.group_size == q.group_size && tq.scales.dtype() == q.scales.dtype() &&
              l.count < kOutputs,
          "matmul: one ", gemv, " GEMV launch takes up to ", kOutputs,
          " outputs of one code width, group and dtype of scales");
    const int64_t params = t->w->dim(0) * (K / tq.group_size);
    check(params <= int64_t(UINT32_MAX), "matmul: the ", gemv, " GEMV takes up to 2^32 groups, got ", params);
    add_output(l, *t, per_block);
  }
  return l;
}

// Past 48 KiB a kernel must ask for its shared memory, once on each device.
// (Set before the flag: a launch on another thread that sees the flag finds
// the attribute set; two that both set it set the same value.)
template <auto Kernel>
void allow_shared_bytes(int device, int64_t bytes, const char* op) {
  static std::atomic<bool> asked[64];
  std::atomic<bool>& done = asked[device % 64];
  if (done.load(std::memory_order_acquire)) return;
  check_cuda(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), op);
  done.store(true, std::memory_order_release);
}

// The output that block (or tile) `block` computes, and the number of its
// first block. `l` is a kernel's __grid_constant__ parameter: indexed where
// it lies, in the parameter space, not copied out first.
__device__ __forceinline__ const Output& block_output(const Launch& l, int64_t block, int64_t& first) {
  int j = 0;
#pragma unroll
  for (int k = 1; k < kOutputs; ++k) j += k < l.count && block >= l.first_block[k];
  first = l.first_block[j];
  return l.out[j];
}

}  // namespace fathom::cuda::affine
