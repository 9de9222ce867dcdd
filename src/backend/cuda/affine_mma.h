#pragma once
// What the tensor-core GEMVs over 4- and 8-bit codes (affine_mma_gemv.cu,
// affine_direct_gemv.cu) share: codes made exact bf16 pairs for the mma,
// the offset those pairs carry, x paired to match, and the mma itself.
// Device code: for .cu files only.
//
// A shift and a mask-and-or drop two 4-bit codes into mantissa bits 3-6 of
// two bf16 16.0s: 16 + q, exact in bf16, is what the mma takes, and
// mma.sync multiplies 16 weight rows by up to 8 rows of x with exact
// products and f32 sums. An 8-bit code is two 4-bit halves, lo + 16·hi, the
// high half meeting 16·x (exact: a power of two). The 16s are taken back
// out with the bias, in f32: Σ x·(16 + q) = Σ x·q + 16·Σ x (at 8 bits
// 16·Σ x + 16·16·Σ x), so a group adds scale·(the mma's sum) + (bias −
// offset·scale)·Σ x. The offset's size is what the f32 sums lose: codes at
// bits 0-3 of a half would come out as 128 + q (5.5e-6 against the op
// suite's 5e-6 bound at 4 bits, and 8 bits' 128·17 cost 1.8e-5); at bits
// 3-6 the offset is 16, the least a single mask-and-or allows.
//
// Which k meets which code is free as long as A and B agree: code_pair
// takes the fields at bits s and s + 16 of a word (s = 0, 4, 8, 12). For a
// 4-bit word (values 0-7) that is values s / 4 and s / 4 + 4, so x is paired
// (0, 4), (1, 5), (2, 6), (3, 7); for an 8-bit word (values 0-3) the low or
// high halves of values s / 8 and s / 8 + 2, so x is paired (0, 2), (1, 3).
#include <cstdint>

#include <cuda_bf16.h>

namespace fathom::cuda::affine {

__device__ __forceinline__ uint32_t bf16_pair(float lo, float hi) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&p);
}

// The 4-bit fields at bits s and s + 16 of w (s = 0, 4, 8 or 12) as an
// exact bf16 pair, 16 + field (the first in the low half): the fields moved
// to bits 3-6 of each half, then (w & mask) | 16.0's bits in one instruction.
__device__ __forceinline__ uint32_t code_pair(uint32_t w, int s) {
  const uint32_t at3 = s == 0 ? w << 3 : w >> (s - 3);
  uint32_t biased;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(biased) : "r"(at3), "r"(0x00780078u), "r"(0x41804180u));
  return biased;
}

// What a group's mma sums hold beyond Σ x·q, in units of Σ x: 16 a code at
// 4 bits; 16 + 16·16 at 8, whose high half meets 16·x.
template <int Bits>
constexpr float kCodeOffset = Bits == 4 ? 16.0f : 16.0f + 16.0f * 16.0f;

// 16 times both halves of a bf16 pair (exact: a power of two).
__device__ __forceinline__ uint32_t times16(uint32_t pair) {
  const __nv_bfloat162 q =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&pair), __floats2bfloat162_rn(16.0f, 16.0f));
  return *reinterpret_cast<const uint32_t*>(&q);
}

// y += A·B over 16 weight rows × 16 k × 8 rows of x: bf16 products, f32 sums.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// y += A·B over 16 weight rows × 32 k × 8 columns of B, A unsigned bytes
// (codes), B signed bytes (x's planes): exact products, exact int32 sums.
__device__ __forceinline__ void mma_u8s8(int (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace fathom::cuda::affine
