// The AVX-512 matmul over affine-quantized weights for decode and verify steps
// (kernels.h, quant_gemv_avx512). Compiled with -mavx512f -mavx512bw -mavx512bf16.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "backend/cpu/codes_avx512.h"
#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

constexpr int kPrefetchBytes = 16 << 10;
constexpr size_t kParamsAhead = 16;  // rows

// The bf16 planes: sub-codes of W = min(bits, 4) bits in 16-bit lanes.
template <int BITS>
struct HalfWordPlanes {
  static constexpr int W = BITS < 4 ? BITS : 4;
  static constexpr int count = 16 / W;  // planes per block of 16 words
};

// Up to 16 scales or biases from element i of a row of `count`, widened to f32
// (lanes past the row read as 0: the load never leaves it).
template <DType P>
inline __m512 load_params(const void* row, int64_t i, int64_t count) {
  const __mmask16 m = count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
  if constexpr (P == DType::f32) return _mm512_maskz_loadu_ps(m, static_cast<const float*>(row) + i);
  const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(row) + i);
  if constexpr (P == DType::f16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// What the kernels subtract from each code before multiplying: the middle of
// its range, so that Σ (q − c)·x stays small instead of cancelling against the
// bias term (with 8-bit codes the uncentred sums lost about four digits). The
// bf16 planes centre each 4-bit sub-code; an 8-bit code's high nibble weighs 16.
inline float code_center(int bits, bool bf16_planes) {
  if (bf16_planes && bits == 8) return 8.0f + 16.0f * 8.0f;
  return float(1 << (bits - 1));
}

// Floats from one row's widened scales to the next: padded for a 16-lane load.
inline int64_t scale_row_stride(const QuantMatmulArgs& a) { return a.K / a.group + 16; }

// `rows` rows' scales widened, scale_row_stride apart; per thread, kept.
inline std::vector<float>& row_scales_scratch(const QuantMatmulArgs& a, int rows = 1) {
  thread_local std::vector<float> scales;
  scales.resize(size_t(rows) * size_t(scale_row_stride(a)));
  return scales;
}

// Block b (16 code words) of weight rows [n, n + NR). The rows lie end to end,
// so the tile is one run of bytes: each block asks for its NR lines of that
// run kPrefetchBytes ahead, one ascending stream (a line per row at the same
// place in each would be NR short streams, which measured slower).
template <int NR>
inline void load_blocks(const uint32_t* tile, int64_t words, int64_t b, __m512i (&w)[NR]) {
  for (int i = 0; i < NR; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(tile) + kPrefetchBytes + (b * NR + i) * 64, _MM_HINT_T0);
    w[i] = _mm512_loadu_si512(tile + i * words + b * 16);
    // Kept in a register: the compiler would fold the load into each plane's
    // shift, loading the same line once a plane.
    asm("" : "+v"(w[i]));
  }
}

// Rows [m0, m0 + R) of x against weight rows [n, n + NR), f32 x. Per block of
// 16 words, plane j holds code j of every word (lane l: value l·P + j of the
// block). scales holds each weight row's widened scales, `stride` apart.
template <int BITS, int R, int NR>
void tile_f32(const QuantMatmulArgs& a, int64_t n, int64_t m0, const float* scales, int64_t stride,
              __m512i scale_lane, __m512 (&acc)[NR][R]) {
  constexpr int P = 32 / BITS;    // codes per word, planes per block
  constexpr int64_t VB = 16 * P;  // values per block
  const float* x = static_cast<const float*>(a.x_planes);
  const int64_t words = a.K / P;
  const __m512i mask = _mm512_set1_epi32((1 << BITS) - 1);
  const __m512 center = _mm512_set1_ps(code_center(BITS, false));
  const int group_shift = std::countr_zero(unsigned(a.group));  // a power of two: no division a block
  // In registers while the loop runs: acc may alias the scales it loads.
  __m512 sum[NR][R];
  for (int i = 0; i < NR; ++i)
    for (int r = 0; r < R; ++r) sum[i][r] = acc[i][r];
  for (int64_t b = 0; b < a.K / VB; ++b) {
    __m512i w[NR];
    load_blocks(a.codes + n * words, words, b, w);
    __m512 part[NR][R];
    for (int i = 0; i < NR; ++i)
      for (int r = 0; r < R; ++r) part[i][r] = _mm512_setzero_ps();
    for (int j = 0; j < P; ++j)
      for (int i = 0; i < NR; ++i) {
        const __m512 q = _mm512_sub_ps(
            _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(w[i], unsigned(j * BITS)), mask)), center);
        for (int r = 0; r < R; ++r)
          part[i][r] = _mm512_fmadd_ps(q, _mm512_loadu_ps(x + (m0 + r) * a.K + b * VB + j * 16), part[i][r]);
      }
    // Lane l covers values [b·VB + l·P, + P): one group each.
    for (int i = 0; i < NR; ++i) {
      const __m512 s = _mm512_permutexvar_ps(scale_lane, _mm512_loadu_ps(scales + i * stride + (b * VB >> group_shift)));
      for (int r = 0; r < R; ++r) sum[i][r] = _mm512_fmadd_ps(part[i][r], s, sum[i][r]);
    }
  }
  for (int i = 0; i < NR; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = sum[i][r];
}

// The same with bf16 x: 16-bit lanes, each sub-code looked up as its bf16
// value and multiplied in pairs (vdpbf16ps); f32 lane i sums half-words 2i and
// 2i + 1, which again cover values [b·VB + i·32/bits, + 32/bits).
template <int BITS, int R, int NR>
void tile_bf16(const QuantMatmulArgs& a, int64_t n, int64_t m0, const float* scales, int64_t stride,
               __m512i scale_lane, __m512 (&acc)[NR][R]) {
  using H = HalfWordPlanes<BITS>;
  constexpr int64_t VB = 512 / BITS;
  const int64_t per_row = quant_gemv_plane_elements(BITS, a.K, true), words = a.K * BITS / 32;
  const bf16_t* x = static_cast<const bf16_t*>(a.x_planes);
  // vpermw reads the low 5 bits of each half-word as its index: entry i holds
  // bf16 of (i mod 2^W), centred, so the bits above a sub-code need no mask.
  struct Values {
    alignas(64) bf16_t v[32];
    Values() {
      for (int i = 0; i < 32; ++i) v[i] = f32_to_bf16(float(i % (1 << H::W) - (1 << (H::W - 1))));
    }
  };
  static const Values values;
  const __m512i table = _mm512_load_si512(values.v);
  const int group_shift = std::countr_zero(unsigned(a.group));  // a power of two: no division a block
  // In registers while the loop runs: acc may alias the scales it loads.
  __m512 sum[NR][R];
  for (int i = 0; i < NR; ++i)
    for (int r = 0; r < R; ++r) sum[i][r] = acc[i][r];
  for (int64_t b = 0; b < a.K / VB; ++b) {
    __m512i w[NR];
    load_blocks(a.codes + n * words, words, b, w);
    __m512 part[NR][R];
    for (int i = 0; i < NR; ++i)
      for (int r = 0; r < R; ++r) part[i][r] = _mm512_setzero_ps();
    for (int j = 0; j < H::count; ++j)
      for (int i = 0; i < NR; ++i) {
        const __m512bh q = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(w[i], unsigned(j * H::W)), table);
        for (int r = 0; r < R; ++r)
          part[i][r] = _mm512_dpbf16_ps(
              part[i][r], q, (__m512bh)_mm512_loadu_si512(x + (m0 + r) * per_row + (b * H::count + j) * 32));
      }
    for (int i = 0; i < NR; ++i) {
      const __m512 s = _mm512_permutexvar_ps(scale_lane, _mm512_loadu_ps(scales + i * stride + (b * VB >> group_shift)));
      for (int r = 0; r < R; ++r) sum[i][r] = _mm512_fmadd_ps(part[i][r], s, sum[i][r]);
    }
  }
  for (int i = 0; i < NR; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = sum[i][r];
}

// The start of weight row n against rows [m0, m0 + R) of x: its scales
// widened into `scales` (groups + 16 floats), so each block reads its lanes'
// scales with a plain load, and acc holding the bias term Σ_g bias_g · Σ x_g,
// sixteen groups per vector, in the lanes the rest is summed in.
template <int R, DType PD>
void start_row(const QuantMatmulArgs& a, int64_t n, int64_t m0, float center, float* scales, __m512 (&acc)[R]) {
  const int64_t groups = a.K / a.group;
  const size_t row_params = size_t(groups) * dtype_size(PD);
  const char* row_scales = static_cast<const char*>(a.scales) + size_t(n) * row_params;
  const char* row_biases = static_cast<const char*>(a.biases) + size_t(n) * row_params;
  // Scales and biases are streams of their own, too thin for the hardware
  // prefetcher to run ahead of: ask for the rows a few ahead now.
  for (size_t at = 0; at < row_params; at += 64) {
    _mm_prefetch(row_scales + kParamsAhead * row_params + at, _MM_HINT_T0);
    _mm_prefetch(row_biases + kParamsAhead * row_params + at, _MM_HINT_T0);
  }
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; g += 16) {
    const __m512 scale = load_params<PD>(row_scales, g, groups);
    _mm512_storeu_ps(scales + g, scale);
    // The codes were centred: bias + center·scale makes up for it.
    const __m512 bias = _mm512_fmadd_ps(_mm512_set1_ps(center), scale, load_params<PD>(row_biases, g, groups));
    const __mmask16 m = groups - g >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (groups - g)) - 1);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(bias, _mm512_maskz_loadu_ps(m, a.x_group_sums + (m0 + r) * groups + g), acc[r]);
  }
}

// Rows [m0, m0 + R) of x against weight rows [n, n + NR): with one row of x,
// several weight rows at once keep independent sums in flight (one row's
// chain of products, scaling and final reduction is longer than the
// out-of-order window would overlap with the next row's), and share each
// load of x. scales holds NR rows of widened scales, `stride` apart.
template <int BITS, int R, int NR, DType PD>
void rows_against(const QuantMatmulArgs& a, int64_t n, int64_t m0, __m512i scale_lane, float* scales,
                  int64_t stride) {
  __m512 acc[NR][R];
  for (int i = 0; i < NR; ++i)
    start_row<R, PD>(a, n + i, m0, code_center(BITS, a.bf16_planes), scales + i * stride, acc[i]);
  if (a.bf16_planes) tile_bf16<BITS, R, NR>(a, n, m0, scales, stride, scale_lane, acc);
  else tile_f32<BITS, R, NR>(a, n, m0, scales, stride, scale_lane, acc);
  for (int i = 0; i < NR; ++i)
    for (int r = 0; r < R; ++r)
      a.y[(m0 + r) * a.N + n + i] = _mm512_reduce_add_ps(acc[i][r]) + (a.bias ? a.bias[n + i] : 0.0f);
}

template <int BITS, DType PD>
void gemv(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr int per_lane = 32 / BITS;  // consecutive values an f32 lane covers
  constexpr int kRows = 4;  // weight rows at a time for rows of x left over from tiles of 4
  // Lane l's group, counted from the block's first group (a block holds whole
  // groups, or lies inside one).
  alignas(64) int32_t lane_group[16];
  for (int l = 0; l < 16; ++l) lane_group[l] = int32_t(l * per_lane / a.group);
  const __m512i scale_lane = _mm512_load_si512(lane_group);
  const int64_t stride = scale_row_stride(a);
  std::vector<float>& scales = row_scales_scratch(a, kRows);
  for (int64_t n = n0; n < n1;) {
    const int64_t rows = n + kRows <= n1 ? kRows : 1;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t m = 0; m + 4 <= a.M; m += 4)
        rows_against<BITS, 4, 1, PD>(a, n + i, m, scale_lane, scales.data(), stride);
    for (int64_t m = a.M / 4 * 4; m < a.M; ++m) {
      if (rows == kRows) rows_against<BITS, 1, kRows, PD>(a, n, m, scale_lane, scales.data(), stride);
      else rows_against<BITS, 1, 1, PD>(a, n, m, scale_lane, scales.data(), stride);
    }
    n += rows;
  }
}

// Any code width (3, 5 and 6 bits: codes cross bytes and words). 16 codes
// fill 2·bits whole bytes; the 16 bytes from the first are copied to each
// 128-bit lane, each 32-bit lane picks the two bytes its code lies in, shifts
// and masks. x is used as it is (f32, bf16-rounded values in bf16 compute).
// For each 32-bit lane i of 16 codes of `bits` (2·bits whole bytes): which
// two bytes its code lies in, and how far to shift them.
struct ByteCodes {
  __m512i picks, shifts, mask;
  explicit ByteCodes(int bits) {
    alignas(64) int8_t pick[64];
    alignas(64) int32_t shift[16];
    for (int i = 0; i < 16; ++i) {
      const int first = i * bits / 8;
      pick[4 * i] = int8_t(first), pick[4 * i + 1] = int8_t(first + 1), pick[4 * i + 2] = pick[4 * i + 3] = -1;
      shift[i] = i * bits % 8;
    }
    picks = _mm512_load_si512(pick);
    shifts = _mm512_load_si512(shift);
    mask = _mm512_set1_epi32((1 << bits) - 1);
  }
};

template <int R, DType PD>
void rows_any(const QuantMatmulArgs& a, int64_t n, int64_t m0, const ByteCodes& c, float* scales) {
  const int bits = a.bits;
  const int64_t groups = a.K / a.group, row_bytes = a.K * bits / 8;
  const uint8_t* row = reinterpret_cast<const uint8_t*>(a.codes) + n * row_bytes;
  // The last row's last 16-byte load would leave the codes: that chunk goes the plain way.
  const int64_t last_safe = n + 1 < a.N ? a.K : (row_bytes - 16) / (2 * bits) * 16;
  __m512 acc[R];
  const float center = code_center(bits, false);
  start_row<R, PD>(a, n, m0, center, scales, acc);
  float tail[R] = {};
  for (int64_t g = 0; g < groups; ++g) {
    __m512 part[R];
    for (int r = 0; r < R; ++r) part[r] = _mm512_setzero_ps();
    for (int64_t i = g * a.group; i < (g + 1) * a.group; i += 16) {
      const uint8_t* at = row + i * bits / 8;
      if (i + 16 > last_safe) {
        for (int64_t k = i; k < i + 16; ++k) {
          const float code = float(code_at(a.codes + n * (row_bytes / 4), bits, k));
          for (int r = 0; r < R; ++r) tail[r] += scales[g] * (code - center) * a.x[(m0 + r) * a.K + k];
        }
        continue;
      }
      _mm_prefetch(reinterpret_cast<const char*>(at) + kPrefetchBytes, _MM_HINT_T0);
      const __m512i bytes = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
      const __m512i codes = _mm512_and_si512(_mm512_srlv_epi32(_mm512_shuffle_epi8(bytes, c.picks), c.shifts), c.mask);
      const __m512 q = _mm512_sub_ps(_mm512_cvtepi32_ps(codes), _mm512_set1_ps(center));
      for (int r = 0; r < R; ++r)
        part[r] = _mm512_fmadd_ps(q, _mm512_loadu_ps(a.x + (m0 + r) * a.K + i), part[r]);
    }
    const __m512 s = _mm512_set1_ps(scales[g]);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(part[r], s, acc[r]);
  }
  for (int r = 0; r < R; ++r)
    a.y[(m0 + r) * a.N + n] = _mm512_reduce_add_ps(acc[r]) + tail[r] + (a.bias ? a.bias[n] : 0.0f);
}

// 3, 5 and 6 bits on bf16 x (bf16 compute, AVX512-VBMI): 32 codes (4·BITS
// bytes) at a time into 16-bit lanes — a byte permute brings each code's two
// bytes into its lane, a shift per lane aligns it — each looked up as the bf16
// value of code − center (vpermw reads an index's low 5 bits, vpermi2w 6, so
// the next code's bits above need no mask), then multiplied with x in pairs
// (vdpbf16ps): f32 lane i sums values 2i and 2i + 1, of one group.
template <int BITS>
struct PairCodes {
  __m512i picks, shifts, lo, hi;  // lo/hi: the bf16 values of codes 0–31 and 32–63
  PairCodes() {
    alignas(64) uint8_t pick[64];
    alignas(64) uint16_t shift[32], value[64];
    for (int j = 0; j < 32; ++j) {
      pick[2 * j] = uint8_t(j * BITS / 8);
      pick[2 * j + 1] = uint8_t(j * BITS / 8 + 1);
      shift[j] = uint16_t(j * BITS % 8);
    }
    for (int i = 0; i < 64; ++i) value[i] = f32_to_bf16(float(i % (1 << BITS) - (1 << (BITS - 1))));
    picks = _mm512_load_si512(pick);
    shifts = _mm512_load_si512(shift);
    lo = _mm512_load_si512(value);
    hi = _mm512_load_si512(value + 32);
  }
};

// Rows [m0, m0 + R) of x against weight rows [n, n + NR) (as rows_against:
// with one row of x, NR rows' sums in flight and each load of x shared).
// scales holds NR rows of widened scales, `stride` apart.
template <int BITS, int R, int NR, DType PD>
__attribute__((target("avx512vbmi"))) void rows_pairs(const QuantMatmulArgs& a, int64_t n, int64_t m0,
                                                      const PairCodes<BITS>& c, float* scales, int64_t stride) {
  constexpr int64_t kChunkBytes = 4 * BITS;  // 32 codes
  const int64_t groups = a.K / a.group, row_bytes = a.K * BITS / 8;
  const uint8_t* tile = reinterpret_cast<const uint8_t*>(a.codes) + n * row_bytes;
  const __mmask64 chunk = (__mmask64(1) << kChunkBytes) - 1;  // the load never leaves the row
  __m512 acc[NR][R];
  for (int j = 0; j < NR; ++j)
    start_row<R, PD>(a, n + j, m0, code_center(BITS, false), scales + j * stride, acc[j]);
  for (int64_t g = 0; g < groups; ++g) {
    __m512 part[NR][R];
    for (int j = 0; j < NR; ++j)
      for (int r = 0; r < R; ++r) part[j][r] = _mm512_setzero_ps();
    for (int64_t i = g * a.group; i < (g + 1) * a.group; i += 32) {
      __m512bh xv[R];
      for (int r = 0; r < R; ++r) xv[r] = (__m512bh)_mm512_loadu_si512(a.xb + (m0 + r) * a.K + i);
      const int64_t at = i / 32 * kChunkBytes;
      for (int j = 0; j < NR; ++j) {
        // The NR rows lie end to end: ask for the run they make, one line
        // each, as far ahead as load_blocks does.
        _mm_prefetch(reinterpret_cast<const char*>(tile) + kPrefetchBytes + (at * NR + j * kChunkBytes),
                     _MM_HINT_T0);
        const __m512i bytes = _mm512_maskz_loadu_epi8(chunk, tile + j * row_bytes + at);
        const __m512i codes = _mm512_srlv_epi16(_mm512_permutexvar_epi8(c.picks, bytes), c.shifts);
        __m512i q;
        if constexpr (BITS == 6) q = _mm512_permutex2var_epi16(c.lo, codes, c.hi);
        else q = _mm512_permutexvar_epi16(codes, c.lo);
        for (int r = 0; r < R; ++r) part[j][r] = _mm512_dpbf16_ps(part[j][r], (__m512bh)q, xv[r]);
      }
    }
    for (int j = 0; j < NR; ++j) {
      const __m512 s = _mm512_set1_ps(scales[j * stride + g]);
      for (int r = 0; r < R; ++r) acc[j][r] = _mm512_fmadd_ps(part[j][r], s, acc[j][r]);
    }
  }
  for (int j = 0; j < NR; ++j)
    for (int r = 0; r < R; ++r)
      a.y[(m0 + r) * a.N + n + j] = _mm512_reduce_add_ps(acc[j][r]) + (a.bias ? a.bias[n + j] : 0.0f);
}

template <int BITS, DType PD>
void gemv_pairs(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr int kRows = 4;  // weight rows at a time for rows of x left over from tiles of 4
  const int64_t stride = scale_row_stride(a);
  std::vector<float>& scales = row_scales_scratch(a, kRows);
  static const PairCodes<BITS> codes;
  for (int64_t n = n0; n < n1;) {
    const int64_t rows = n + kRows <= n1 ? kRows : 1;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t m = 0; m + 4 <= a.M; m += 4) rows_pairs<BITS, 4, 1, PD>(a, n + i, m, codes, scales.data(), stride);
    for (int64_t m = a.M / 4 * 4; m < a.M; ++m) {
      if (rows == kRows) rows_pairs<BITS, 1, kRows, PD>(a, n, m, codes, scales.data(), stride);
      else rows_pairs<BITS, 1, 1, PD>(a, n, m, codes, scales.data(), stride);
    }
    n += rows;
  }
}

template <DType PD>
void gemv_any(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  std::vector<float>& scales = row_scales_scratch(a);
  const ByteCodes codes(a.bits);
  for (int64_t n = n0; n < n1; ++n) {
    int64_t m = 0;
    for (; m + 4 <= a.M; m += 4) rows_any<4, PD>(a, n, m, codes, scales.data());
    for (; m < a.M; ++m) rows_any<1, PD>(a, n, m, codes, scales.data());
  }
}

// f<PD>() for the dtype of the scales and biases.
template <class F>
void by_params(DType params, F&& f) {
  switch (params) {
    case DType::f32: return f.template operator()<DType::f32>();
    case DType::f16: return f.template operator()<DType::f16>();
    default: return f.template operator()<DType::bf16>();
  }
}

}  // namespace

bool quant_gemv_planes_take(int bits, int64_t K) { return (bits == 2 || bits == 4 || bits == 8) && K % (512 / bits) == 0; }

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
  const bool pairs = !a.x_planes && a.xb && a.group % 32 == 0 && avx512_vbmi_available();
  by_params(a.params, [&]<DType PD>() {
    if (a.x_planes) switch (a.bits) {
        case 2: return gemv<2, PD>(a, n0, n1);
        case 4: return gemv<4, PD>(a, n0, n1);
        case 8: return gemv<8, PD>(a, n0, n1);
      }
    if (pairs) switch (a.bits) {
        case 3: return gemv_pairs<3, PD>(a, n0, n1);
        case 5: return gemv_pairs<5, PD>(a, n0, n1);
        case 6: return gemv_pairs<6, PD>(a, n0, n1);
      }
    gemv_any<PD>(a, n0, n1);  // any width, x as it is
  });
}

}  // namespace fathom::cpu
