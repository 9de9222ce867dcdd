// The AVX-512 matmul over affine-quantized weights for decode and verify steps
// (kernels.h, quant_gemv_avx512). Compiled with -mavx512f -mavx512bw -mavx512bf16.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

constexpr int kMaxGroupsPerRow = 4096;  // K / group: K up to 131072 at groups of 32
constexpr int kPrefetchBytes = 16 << 10;

// The bf16 planes: sub-codes of W = min(bits, 4) bits in 16-bit lanes.
template <int BITS>
struct HalfWordPlanes {
  static constexpr int W = BITS < 4 ? BITS : 4;
  static constexpr int count = 16 / W;  // planes per block of 16 words
};

// Rows [m0, m0 + R) of x against weight row n, f32 x. Per block of 16 words,
// plane j holds code j of every word (lane l: value l·P + j of the block).
template <int BITS, int R>
void rows_f32(const QuantMatmulArgs& a, int64_t n, int64_t m0, const float* scales, __m512i scale_lane,
              __m512* acc) {
  constexpr int P = 32 / BITS;    // codes per word, planes per block
  constexpr int64_t VB = 16 * P;  // values per block
  const float* x = static_cast<const float*>(a.x_planes);
  const uint32_t* row = a.codes + n * (a.K / P);
  const __m512i mask = _mm512_set1_epi32((1 << BITS) - 1);
  for (int64_t b = 0; b < a.K / VB; ++b) {
    _mm_prefetch(reinterpret_cast<const char*>(row + b * 16) + kPrefetchBytes, _MM_HINT_T0);
    const __m512i w = _mm512_loadu_si512(row + b * 16);
    __m512 part[R];
    for (int r = 0; r < R; ++r) part[r] = _mm512_setzero_ps();
    for (int j = 0; j < P; ++j) {
      const __m512 q = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(w, unsigned(j * BITS)), mask));
      for (int r = 0; r < R; ++r)
        part[r] = _mm512_fmadd_ps(q, _mm512_loadu_ps(x + (m0 + r) * a.K + b * VB + j * 16), part[r]);
    }
    // Lane l covers values [b·VB + l·P, + P): one group each.
    const __m512 s = _mm512_permutexvar_ps(scale_lane, _mm512_loadu_ps(scales + b * VB / a.group));
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(part[r], s, acc[r]);
  }
}

// The same with bf16 x: 16-bit lanes, each sub-code looked up as its bf16
// value and multiplied in pairs (vdpbf16ps); f32 lane i sums half-words 2i and
// 2i + 1, which again cover values [b·VB + i·32/bits, + 32/bits).
template <int BITS, int R>
void rows_bf16(const QuantMatmulArgs& a, int64_t n, int64_t m0, const float* scales, __m512i scale_lane,
               __m512* acc) {
  using H = HalfWordPlanes<BITS>;
  constexpr int64_t VB = 512 / BITS;
  const int64_t per_row = quant_gemv_plane_elements(BITS, a.K, true);
  const bf16_t* x = static_cast<const bf16_t*>(a.x_planes);
  const uint32_t* row = a.codes + n * (a.K * BITS / 32);
  const __m512i mask = _mm512_set1_epi16(int16_t((1 << H::W) - 1));
  // bf16 of 0..15, the values a sub-code can take.
  const __m512i table = _mm512_setr_epi32(0x3F800000, 0x40404000, 0x40A04080, 0x40E040C0, 0x41104100, 0x41304120,
                                          0x41504140, 0x41704160, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int64_t b = 0; b < a.K / VB; ++b) {
    _mm_prefetch(reinterpret_cast<const char*>(row + b * 16) + kPrefetchBytes, _MM_HINT_T0);
    const __m512i w = _mm512_loadu_si512(row + b * 16);
    __m512 part[R];
    for (int r = 0; r < R; ++r) part[r] = _mm512_setzero_ps();
    for (int j = 0; j < H::count; ++j) {
      const __m512i code = _mm512_and_si512(_mm512_srli_epi16(w, unsigned(j * H::W)), mask);
      const __m512bh q = (__m512bh)_mm512_permutexvar_epi16(code, table);
      for (int r = 0; r < R; ++r)
        part[r] = _mm512_dpbf16_ps(
            part[r], q, (__m512bh)_mm512_loadu_si512(x + (m0 + r) * per_row + (b * H::count + j) * 32));
    }
    const __m512 s = _mm512_permutexvar_ps(scale_lane, _mm512_loadu_ps(scales + b * VB / a.group));
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(part[r], s, acc[r]);
  }
}

template <int BITS, int R>
void rows_against(const QuantMatmulArgs& a, int64_t n, int64_t m0, const float* scales, const float* biases,
                  __m512i scale_lane) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  if (a.bf16_planes) rows_bf16<BITS, R>(a, n, m0, scales, scale_lane, acc);
  else rows_f32<BITS, R>(a, n, m0, scales, scale_lane, acc);
  const int64_t groups = a.K / a.group;
  for (int r = 0; r < R; ++r) {
    const float* sums = a.x_group_sums + (m0 + r) * groups;
    float bias_term = 0.0f;
    for (int64_t g = 0; g < groups; ++g) bias_term += biases[g] * sums[g];
    a.y[(m0 + r) * a.N + n] = _mm512_reduce_add_ps(acc[r]) + bias_term + (a.bias ? a.bias[n] : 0.0f);
  }
}

template <int BITS>
void gemv(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr int per_lane = 32 / BITS;  // consecutive values an f32 lane covers
  const int64_t groups = a.K / a.group;
  // Lane l's group, counted from the block's first group (a block holds whole
  // groups, or lies inside one).
  alignas(64) int32_t lane_group[16];
  for (int l = 0; l < 16; ++l) lane_group[l] = int32_t(l * per_lane / a.group);
  const __m512i scale_lane = _mm512_load_si512(lane_group);
  // The row's scales and biases in f32, padded so a 16-lane load at the last
  // group stays inside.
  alignas(64) float scales[kMaxGroupsPerRow + 16] = {}, biases[kMaxGroupsPerRow];
  const size_t param_bytes = dtype_size(a.params);
  for (int64_t n = n0; n < n1; ++n) {
    const char* s = static_cast<const char*>(a.scales) + size_t(n * groups) * param_bytes;
    const char* b = static_cast<const char*>(a.biases) + size_t(n * groups) * param_bytes;
    for (int64_t g = 0; g < groups; ++g) {
      scales[g] = param_at(s, a.params, g);
      biases[g] = param_at(b, a.params, g);
    }
    int64_t m = 0;
    for (; m + 4 <= a.M; m += 4) rows_against<BITS, 4>(a, n, m, scales, biases, scale_lane);
    for (; m < a.M; ++m) rows_against<BITS, 1>(a, n, m, scales, biases, scale_lane);
  }
}

}  // namespace

bool quant_gemv_takes(int bits, int64_t K) {
  if (bits != 2 && bits != 4 && bits != 8) return false;
  return K % (512 / bits) == 0 && K / 32 <= kMaxGroupsPerRow;
}

int64_t quant_gemv_plane_elements(int bits, int64_t K, bool bf16) {
  // bf16: 16/W planes of 32 half-word lanes per block of 512/bits values.
  return bf16 ? K / (512 / bits) * (16 / std::min(bits, 4)) * 32 : K;
}

void quant_gemv_planes(const float* x, int64_t M, int64_t K, int bits, bool bf16, void* out) {
  const int64_t per_row = quant_gemv_plane_elements(bits, K, bf16);
  if (!bf16) {
    const int64_t P = 32 / bits, VB = 16 * P;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t b = 0; b < K / VB; ++b)
        for (int64_t j = 0; j < P; ++j)
          for (int64_t l = 0; l < 16; ++l)
            static_cast<float*>(out)[m * per_row + b * VB + j * 16 + l] = x[m * K + b * VB + l * P + j];
    return;
  }
  // Half-word lane l of plane j: sub-code j (W bits at bit j·W) of half-word l
  // belongs to value l·16/bits + j·W/bits, weighing 2^(j·W mod bits) there.
  const int W = std::min(bits, 4), planes = 16 / W;
  const int64_t VB = 512 / bits;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < K / VB; ++b)
      for (int j = 0; j < planes; ++j)
        for (int l = 0; l < 32; ++l) {
          const float v = x[m * K + b * VB + l * (16 / bits) + j * W / bits] * float(1 << (j * W % bits));
          static_cast<bf16_t*>(out)[m * per_row + (b * planes + j) * 32 + l] = f32_to_bf16(v);
        }
}

void quant_gemv_avx512(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  switch (a.bits) {
    case 2: return gemv<2>(a, n0, n1);
    case 4: return gemv<4>(a, n0, n1);
    case 8: return gemv<8>(a, n0, n1);
  }
}

}  // namespace fathom::cpu
