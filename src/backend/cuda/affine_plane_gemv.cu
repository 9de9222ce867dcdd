// Decode matmuls of one row of x over 4- and 8-bit MLX affine codes
// in bf16 compute, on the integer tensor cores: the codes are the mma's
// unsigned bytes as they are (8 bits) or split into bytes by two masks (4
// bits), and x, rounded to bf16 as bf16 compute asks, is three planes of
// signed bytes.
//
// x as planes. In each group of x (the weights' group along k), the rounded
// values are fixed point against the group's largest: X = x·2^s, s = 21 −
// ⌊log2 max |x|⌋, an integer below 2^22 in magnitude, exact for every value
// within 2^-14 of the largest (bf16 holds 8 significant bits), and within
// 2^-23 of the largest for the rest. X is three balanced base-256 digits,
// X = d2·2^16 + d1·2^8 + d0, each a signed byte: plane p holds d_p. One mma
// sums codes times digits over 32 k exactly in int32, so a group adds
//   scale · 2^-s · (2^16·P2 + 2^8·P1 + P0) + bias · Σ x
// to its row, in f32 (the P_p are exact in f32: below 2^24).
//
// The mma's 8 columns of B take the planes, three a group: two groups a step
// (columns 0-2 the first group's planes, 3-5 the second's; a lane of B
// gives zeros where its k fall in the other group). A step is one load of
// each of a lane's two weight rows (g and g + 8, lane (g, t) = (lane / 4,
// lane % 4)) holding its quarter t of the step's groups: up to 32 bytes a
// row. Against the bf16
// mma (affine_direct_gemv.cu, affine_mma_gemv.cu), which converts each pair
// of codes to bf16 in two instructions, 8-bit codes need no conversion and
// 4-bit ones three instructions a word, and a k32 mma takes twice the k of
// a k16 one. (Two rows of x, three planes each, would leave room for one
// group a step: measured slower than those kernels, bench/RESULTS.md.)
//
// A crew is 8 warps on one tile of 16 rows at a time; the grid is as many
// crews as are resident, each going through tiles in turn. In a tile, warp
// w takes steps w, w + 8, ...; its loads run several steps ahead in
// registers, on across the end of a tile into the next, and the warps' sums
// of a tile meet in shared memory (double-buffered: one barrier of the crew
// a tile). A block is two crews, one block a multiprocessor, and its 16
// warps stage x's planes once for both, while the first steps' loads are
// in flight: against two blocks of one crew, half the passes a thread and
// half the staging a multiprocessor.
#include <algorithm>
#include <type_traits>

#include "backend/cuda/affine_launch.h"
#include "backend/cuda/affine_mma.h"
#include "backend/cuda/cuda_backend.h"

namespace fathom::cuda {
namespace {

using affine::block_output;
using affine::Launch;
using affine::load_codes;
using affine::load_param;
using affine::mma_u8s8;
using affine::Output;
using affine::param_float;
using affine::ParamType;

constexpr int kTileRows = 16;  // weight rows per tile: the mma's M
constexpr int kWarps = 8;       // a crew's
constexpr int kCrews = 2;       // a block's
constexpr int kCrewThreads = 32 * kWarps;
constexpr int kPlanes = 3;
// 228 KiB of shared memory on Hopper, 1 KiB of it reserved a block.
constexpr int64_t kMaxSharedBytes = 228 * 1024 - 1024;

template <int Bits, int Group>
struct Shape {
  // Two groups a step, up to 32 bytes of a row a lane (8-bit groups of 128:
  // one group).
  static constexpr int kLaneBytes = std::min(32, 2 * Group * Bits / 32);  // of a row, a step
  static constexpr int kLaneWords = kLaneBytes / 4;
  static constexpr int kValues = 4 * kLaneBytes * 8 / Bits;  // of a row, a step
  static constexpr int kGroupsInStep = kValues / Group;      // 1 or 2
  static_assert(kGroupsInStep * Group == kValues && (kGroupsInStep == 1 || kGroupsInStep == 2));
  static constexpr int kMmas = Bits == 4 ? kLaneWords : kLaneWords / 2;
  static constexpr int kLaneValues = kValues / 4;  // a lane's k of a step: 8 a mma
};

// What each step of x contributes to the sums, beside its planes: for each
// column n of C the unit its integers count (2^-s · 2^(8p) of its group and
// plane, 0 for a column past the step's groups), and for each lane t the Σ x
// of group t (0 past the step's groups), which the lane's bias term weighs.
// A lane reads its two columns' units and its Σ x at fixed offsets, so that
// no per-lane index into the step's groups is kept or recomputed.
struct StepRecord {
  float unit[8];
  float sum_x[4];
};

// What a launch's shared memory holds: x's planes (each K rounded up to
// whole steps, 16 bytes more so that planes fall on other banks), a step
// record per step, a lane's bytes of B in a step as zeros (the B of lanes
// whose columns or k take none of x), then each crew's warps' sums of a
// tile (two buffers).
struct SharedLayout {
  int64_t plane_stride, groups_padded, records_at, zeros_at, zero_bytes, partial_at, bytes;
  __host__ __device__ SharedLayout(int64_t K, int values, int group) {
    const int64_t padded = (K + values - 1) / values * values;
    plane_stride = padded + 16;
    groups_padded = padded / group;
    records_at = (kPlanes * plane_stride + 15) / 16 * 16;
    zeros_at = records_at + padded / values * int64_t(sizeof(StepRecord));
    zero_bytes = values / 4;
    partial_at = zeros_at + zero_bytes;
    bytes = partial_at + kCrews * 2 * kWarps * kTileRows * 8 * 4;
  }
};

// 2^e for e in [-126, 127].
__device__ __forceinline__ float exp2_int(int e) { return __int_as_float((e + 127) << 23); }

// The low bytes of a, b, c, d as one word, a's lowest.
__device__ __forceinline__ uint32_t pack_bytes(int a, int b, int c, int d) {
  return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
}

// x into planes, a thread 8 values a pass: rounded to bf16, each
// group's largest found by shuffles among its lanes (Group / 8 of them,
// neighbours in one warp), digits stored where the lanes of B read them,
// and the group's units and Σ x in its step's record. Past K: zeros. A
// 4-bit word's values meet the mma's k as its two masks take them (values
// 0, 2, 4, 6 in the first word of B, 1, 3, 5, 7 in the second): each 8
// digits are stored in that order. An 8-bit word's values meet k in order.
template <int Bits, int Group, int GroupsInStep>
__device__ void stage_planes(const float* __restrict__ x, int64_t K, const SharedLayout& layout,
                             unsigned char* planes, StepRecord* records) {
  constexpr int kLanesPerGroup = Group / 8;
  const int64_t total = layout.groups_padded * Group / 8;
  // Every thread runs every pass (a group's lanes meet by shuffles); total
  // is a whole number of groups, so lanes past it are whole groups.
  for (int64_t base = 0; base < total; base += blockDim.x) {
    const int64_t u = base + threadIdx.x;
    const bool live = u < total;
    float v[8] = {};
    if (live && u * 8 < K) {
      const float4* src = reinterpret_cast<const float4*>(x + u * 8);
      const float4 lo = __ldg(src), hi = __ldg(src + 1);
      v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
    }
    float largest = 0.0f, sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      v[i] = __bfloat162float(__float2bfloat16_rn(v[i]));
      largest = fmaxf(largest, fabsf(v[i]));
      sum += v[i];
    }
#pragma unroll
    for (int s = 1; s < kLanesPerGroup; s <<= 1) {
      largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, s));
      sum += __shfl_xor_sync(0xffffffffu, sum, s);
    }
    // x that is not finite makes its group's sums NaN, as a plain matmul's.
    // s = 21 − ⌊log2 largest⌋ (−127 for zero or subnormal), in [−106, 148]:
    // 2^s as two factors that are normal floats.
    const bool finite = isfinite(sum);
    const int top = int((__float_as_uint(largest) >> 23) & 0xff) - 127;
    const int shift = finite ? 21 - top : 0, half = shift / 2;
    const float up_a = exp2_int(half), up_b = exp2_int(shift - half);
    // Balanced digits: d0 ≡ X (mod 256), X1 = (X − d0) / 256 = ⌊(X + 128) / 256⌋, and so on.
    int digit[kPlanes][8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int X = __float2int_rn(v[i] * up_a * up_b), X1 = (X + 128) >> 8;
      digit[0][i] = X, digit[1][i] = X1, digit[2][i] = (X1 + 128) >> 8;
    }
    uint32_t words[kPlanes][2];
#pragma unroll
    for (int p = 0; p < kPlanes; ++p) {
      const int* d = digit[p];
      if constexpr (Bits == 4) {  // values 0, 2, 4, 6, then 1, 3, 5, 7
        words[p][0] = pack_bytes(d[0], d[2], d[4], d[6]), words[p][1] = pack_bytes(d[1], d[3], d[5], d[7]);
      } else {
        words[p][0] = pack_bytes(d[0], d[1], d[2], d[3]), words[p][1] = pack_bytes(d[4], d[5], d[6], d[7]);
      }
    }
    if (live) {
#pragma unroll
      for (int p = 0; p < kPlanes; ++p)
        *reinterpret_cast<uint2*>(planes + p * layout.plane_stride + u * 8) =
            uint2{words[p][0], words[p][1]};
      if (u % kLanesPerGroup == 0) {
        const int64_t group = u / kLanesPerGroup;
        const int in_step = int(group % GroupsInStep);
        StepRecord& r = records[group / GroupsInStep];
#pragma unroll
        for (int p = 0; p < kPlanes; ++p)  // 2^(8p − s) as two normal factors
          r.unit[kPlanes * in_step + p] =
              finite ? exp2_int(-half) * exp2_int(half - shift + 8 * p) : __int_as_float(0x7fc00000);
        r.sum_x[in_step] = sum;
        if (in_step == 0) {  // the step's columns and lanes past its groups
#pragma unroll
          for (int n = kPlanes * GroupsInStep; n < 8; ++n) r.unit[n] = 0.0f;
#pragma unroll
          for (int i = GroupsInStep; i < 4; ++i) r.sum_x[i] = 0.0f;
        }
      }
    }
  }
}

// Whether a step's two groups' bf16 scales (and biases) of a row come as
// one word: two groups a step, and rows of an even number of groups (every
// pair then starts a word). A template parameter (Pairs) of the kernel, so
// that its loads hold no branch for rows of an odd number of groups: their
// launches load a group at a time.
template <int Bits, int Group, bool Bf16Params>
constexpr bool pairs_possible() {
  return Bf16Params && Shape<Bits, Group>::kGroupsInStep == 2;
}

// One step's loads: a lane's bytes of the step in rows g and g + 8, and the
// raw bits of those rows' scales and biases of the step's groups (i: row
// g + 8 · (i / 2), group i % 2; in pairs, i = 2 · row holds both
// groups, the first in the low half). Parameters are half a step's
// registers or more: in pairs they hold fewer, and more bytes of codes are
// in flight.
template <int Bits, int Group>
struct StepLoads {
  uint32_t a[Shape<Bits, Group>::kLaneWords], b[Shape<Bits, Group>::kLaneWords];
  uint32_t scale[4], bias[4];
};

// Where the loads of one tile come from: rows g and g + 8 (the last row for
// rows past the output's end).
struct TileSource {
  const uint32_t* row[2];
  uint32_t param[2];  // index of the rows' first group's scale
  uint32_t row_words, groups;
  const void* scales;
  const void* biases;
  ParamType params;

  __device__ __forceinline__ void set(const Output& o, int64_t n0, int64_t words, int64_t row_groups, int g) {
    const int64_t last = o.n - 1;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = std::min(n0 + g + 8 * h, last);
      row[h] = o.codes + r * words;
      param[h] = uint32_t(r * row_groups);
    }
    row_words = uint32_t(words), groups = uint32_t(row_groups);
    scales = o.scales, biases = o.biases, params = o.params;
  }
};

template <int Bits, int Group, bool Bf16Params, bool Pairs>
__device__ __forceinline__ void load_step(StepLoads<Bits, Group>& s, const TileSource& src, uint32_t step, int t) {
  using S = Shape<Bits, Group>;
  // A lane's words past its row's end (a last step of one group where a
  // step holds two) are read from the row's start: B is zero there.
  uint32_t at = step * (S::kValues * Bits / 32) + t * S::kLaneWords;
  if (at >= src.row_words) at = 0;
  load_codes<S::kLaneWords>(src.row[0] + at, s.a);
  load_codes<S::kLaneWords>(src.row[1] + at, s.b);
  if constexpr (Pairs) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t pair = src.param[h] / 2 + step;
      s.scale[2 * h] = __ldg(static_cast<const uint32_t*>(src.scales) + pair);
      s.bias[2 * h] = __ldg(static_cast<const uint32_t*>(src.biases) + pair);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = i / 2, j = i % 2;
      if (j >= S::kGroupsInStep) {
        s.scale[i] = s.scale[i - 1], s.bias[i] = s.bias[i - 1];
        continue;
      }
      const uint32_t group = std::min(step * S::kGroupsInStep + j, src.groups - 1);
      s.scale[i] = load_param<Bf16Params>(src.scales, src.params, src.param[h] + group);
      s.bias[i] = load_param<Bf16Params>(src.biases, src.params, src.param[h] + group);
    }
  }
}

template <int Bits, int Group, bool Bf16Params, bool Pairs>
__global__ void __launch_bounds__(kCrews * kCrewThreads, 1)
    affine_plane_gemv_kernel(const __grid_constant__ Launch launch, const float* __restrict__ x, int64_t K) {
  using S = Shape<Bits, Group>;
  // Steps a lane has loaded ahead: about 64 registers of codes and
  // parameters, at least two.
  static_assert(!Pairs || pairs_possible<Bits, Group, Bf16Params>());
  constexpr int Ahead = std::max(2, 64 / (2 * S::kLaneWords + (Pairs ? 4 : 8)));
  extern __shared__ uint4 shared_words[];
  const SharedLayout layout(K, S::kValues, Group);
  const int64_t row_groups = K / Group, row_words = K * Bits / 32;
  const int steps_in_row = int(layout.groups_padded * Group / S::kValues);
  auto* planes = reinterpret_cast<unsigned char*>(shared_words);
  auto* records = reinterpret_cast<StepRecord*>(reinterpret_cast<char*>(shared_words) + layout.records_at);
  auto* zeros = reinterpret_cast<char*>(shared_words) + layout.zeros_at;
  const int crew = threadIdx.x / kCrewThreads, crew_thread = threadIdx.x % kCrewThreads;
  auto* partial = reinterpret_cast<float(*)[kWarps][kTileRows][8]>(reinterpret_cast<char*>(shared_words) +
                                                                    layout.partial_at) + 2 * crew;
  const int warp = crew_thread / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  // This lane's column of B (g): plane g % 3 of the step's group g / 3;
  // none past the step's groups, and none where its k (quarter t of the
  // step) fall in the other group: such a lane reads the zeros, at every
  // step (a stride of 0), so that its loads need no branch.
  const int b_group = g / kPlanes, b_plane = g % kPlanes;
  const bool b_live = b_group < S::kGroupsInStep && (S::kGroupsInStep == 1 || t / 2 == b_group);
  const unsigned char* b_src = b_live ? planes + b_plane * layout.plane_stride + t * S::kLaneValues
                                      : reinterpret_cast<const unsigned char*>(zeros);
  const int b_stride = b_live ? S::kValues : 0;
  // This lane's columns of C are 2t and 2t + 1. Their scales, in pairs: the
  // byte_perm selector that puts the column's group's bf16 high and zeros
  // low (the first group is the pair's low half). The bias term of group t
  // (t below the step's groups) is lane t's: one term a row, not one for
  // each column of plane 0; other lanes' selector gives 0.
  const auto pair_half = [](bool second) { return second ? 0x3244u : 0x1044u; };
  const bool second[2] = {(2 * t) / kPlanes == 1, (2 * t + 1) / kPlanes == 1};
  const uint32_t column_half[2] = {pair_half(second[0]), pair_half(second[1])};
  const bool adds_bias = t < S::kGroupsInStep;
  const uint32_t bias_half = adds_bias ? pair_half(t == 1) : 0x4444u;

  const int64_t tiles = launch.first_block[launch.count];
  // Crew c of block b is crew kCrews · b + c of the grid's.
  const int64_t crews = int64_t(gridDim.x) * kCrews, my_crew = int64_t(blockIdx.x) * kCrews + crew;
  const int my_tiles = my_crew < tiles ? int((tiles - 1 - my_crew) / crews) + 1 : 0;
  const int mine = warp < steps_in_row ? (steps_in_row - 1 - warp) / kWarps + 1 : 0;
  const int steps = my_tiles * mine;
  const auto tile_of = [&](int i) { return my_crew + int64_t(i) * crews; };

  TileSource src;
  int load_tile = 0, load_chunk = 0;
  const auto load_next = [&](StepLoads<Bits, Group>& s) {
    if (load_chunk == 0) {
      int64_t first;
      const Output& o = block_output(launch, tile_of(load_tile), first);
      src.set(o, (tile_of(load_tile) - first) * kTileRows, row_words, row_groups, g);
    }
    load_step<Bits, Group, Bf16Params, Pairs>(s, src, uint32_t(warp + load_chunk * kWarps), t);
    if (++load_chunk == mine) load_chunk = 0, ++load_tile;
  };
  // Weights only: these loads run while the kernel before this one ends.
  // (x's loads for the planes come behind them, and ncu puts a third of a
  // lone launch's samples on waiting for x; but two steps loaded first, x
  // prefetched into L1, then the rest, ran 2.5% slower in the step.)
  StepLoads<Bits, Group> ring[Ahead];
#pragma unroll
  for (int i = 0; i < Ahead; ++i)
    if (i < steps) load_next(ring[i]);
  await_previous_kernel();
  stage_planes<Bits, Group, S::kGroupsInStep>(x, K, layout, planes, records);
  if (threadIdx.x < layout.zero_bytes / 4) reinterpret_cast<uint32_t*>(zeros)[threadIdx.x] = 0;
  __syncthreads();

  float acc[2][2] = {};  // [row g, g + 8][column 2t, 2t + 1]
  float bias_acc[2] = {};  // [row g, g + 8]: this lane's bias terms
  int tile = 0, chunk = 0;
  const auto finish_tile = [&] {
    auto& part = partial[tile % 2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 2; ++j) part[warp][g + 8 * h][2 * t + j] = acc[h][j] + (j == 0 ? bias_acc[h] : 0.0f);
    asm volatile("bar.sync %0, %1;" ::"r"(1 + crew), "r"(kCrewThreads) : "memory");  // the crew's warps
    if (crew_thread < kTileRows) {
      int64_t first;
      const Output& o = block_output(launch, tile_of(tile), first);
      const int row = crew_thread;
      const int64_t n = (tile_of(tile) - first) * kTileRows + row;
      if (n < o.n) {
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w)
#pragma unroll
          for (int c = 0; c < kPlanes * S::kGroupsInStep; ++c) v += part[w][row][c];
        o.y[n] = v + (o.bias ? o.bias[n] : 0.0f);
      }
    }
    acc[0][0] = acc[0][1] = acc[1][0] = acc[1][1] = bias_acc[0] = bias_acc[1] = 0.0f;
    ++tile;
  };

  for (int base = 0; base < steps; base += Ahead) {
#pragma unroll
    for (int i = 0; i < Ahead; ++i) {
      if (base + i >= steps) break;
      StepLoads<Bits, Group>& s = ring[i];
      const int step = warp + chunk * kWarps;
      // B: 8 bytes a mma, loaded 16 at a time.
      uint32_t bw[2 * S::kMmas];
      const unsigned char* bp = b_src + step * b_stride;
#pragma unroll
      for (int k = 0; k < 2 * S::kMmas; k += 4) {
        if constexpr (S::kMmas == 1) {
          const uint2 v = *reinterpret_cast<const uint2*>(bp);
          bw[0] = v.x, bw[1] = v.y;
        } else {
          const uint4 v = *reinterpret_cast<const uint4*>(bp + 4 * k);
          bw[k] = v.x, bw[k + 1] = v.y, bw[k + 2] = v.z, bw[k + 3] = v.w;
        }
      }
      int c[4] = {};
#pragma unroll
      for (int m = 0; m < S::kMmas; ++m) {
        uint32_t a[4];
        if constexpr (Bits == 4) {
          a[0] = s.a[m] & 0x0f0f0f0fu, a[2] = (s.a[m] >> 4) & 0x0f0f0f0fu;
          a[1] = s.b[m] & 0x0f0f0f0fu, a[3] = (s.b[m] >> 4) & 0x0f0f0f0fu;
        } else {
          a[0] = s.a[2 * m], a[2] = s.a[2 * m + 1], a[1] = s.b[2 * m], a[3] = s.b[2 * m + 1];
        }
        const uint32_t b[2] = {bw[2 * m], bw[2 * m + 1]};
        mma_u8s8(c, a, b);
      }
      // C holds rows g, g + 8 × columns 2t, 2t + 1. src.params is the load
      // side's, which may be a tile ahead: a launch's outputs share one
      // dtype of scales (affine_plane_gemv checks). Selects, not an index:
      // an index that is not a constant would put the ring of loads in
      // local memory.
      const StepRecord& record = records[step];
      const float2 unit = *reinterpret_cast<const float2*>(&record.unit[2 * t]);
      const float sum_x = record.sum_x[t];
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float scale;
          if constexpr (Pairs) scale = __uint_as_float(__byte_perm(s.scale[2 * h], 0u, column_half[j]));
          else scale = param_float<Bf16Params>(second[j] ? s.scale[2 * h + 1] : s.scale[2 * h], src.params);
          acc[h][j] = fmaf(scale * (j == 0 ? unit.x : unit.y), __int2float_rn(c[2 * h + j]), acc[h][j]);
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float bias;
        if constexpr (Pairs) {
          bias = __uint_as_float(__byte_perm(s.bias[2 * h], 0u, bias_half));
        } else {
          bias = param_float<Bf16Params>(t == 1 ? s.bias[2 * h + 1] : s.bias[2 * h], src.params);
          bias = adds_bias ? bias : 0.0f;
        }
        bias_acc[h] = fmaf(bias, sum_x, bias_acc[h]);
      }
      if (base + i + Ahead < steps) load_next(s);
      if (++chunk == mine) chunk = 0, finish_tile();
    }
  }
  // A warp with no steps (K of fewer than kWarps steps) still meets its
  // crew at each tile's barrier.
  if (mine == 0)
    while (tile < my_tiles) finish_tile();
}

template <int Bits, int Group>
int64_t shared_bytes(int64_t K) {
  return SharedLayout(K, Shape<Bits, Group>::kValues, Group).bytes;
}

// Calls f(bits, group) with each as a compile-time constant.
template <typename F>
void with_shape(int bits, int group, F&& f) {
  using std::integral_constant;
  const auto by_group = [&](auto b) {
    if (group == 32) f(b, integral_constant<int, 32>{});
    else if (group == 64) f(b, integral_constant<int, 64>{});
    else f(b, integral_constant<int, 128>{});
  };
  if (bits == 4) by_group(integral_constant<int, 4>{});
  else by_group(integral_constant<int, 8>{});
}

}  // namespace

bool CudaBackend::affine_plane_suits(int64_t M, int64_t K, int bits, int group) {
  if (M != 1 || (bits != 4 && bits != 8) || (group != 32 && group != 64 && group != 128) || K % group != 0)
    return false;
  int64_t bytes = 0;
  with_shape(bits, group, [&](auto b, auto g) { bytes = shared_bytes<decltype(b)::value, decltype(g)::value>(K); });
  return bytes <= kMaxSharedBytes;
}

void CudaBackend::affine_plane_gemv(const float* x, int64_t M, int64_t K,
                                    std::span<const MatmulTarget* const> targets) {
  const AffineQuant& q = targets.front()->w->affine_quant();
  check(affine_plane_suits(M, K, q.bits, q.group_size), "matmul: the integer quantized GEMV takes one row of x over",
        " 4- or 8-bit codes in groups of 32, 64 or 128 whose x fits ", kMaxSharedBytes,
        " bytes of shared memory; got ", M, " rows of K ", K, " at ", q.bits, " bits in groups of ", q.group_size);
  const Launch args = affine::gather_outputs(targets, K, kTileRows, "integer");
  const int64_t tiles = args.first_block[args.count];
  with_shape(q.bits, q.group_size, [&](auto b, auto g) {
    constexpr int Bits = decltype(b)::value, G = decltype(g)::value;
    const auto go = [&]<bool Bf16Params, bool Pairs>(std::bool_constant<Bf16Params>, std::bool_constant<Pairs>) {
      constexpr auto kernel = affine_plane_gemv_kernel<Bits, G, Bf16Params, Pairs>;
      affine::allow_shared_bytes<kernel>(ctx_->device, kMaxSharedBytes, "matmul: quantized gemv (integer)");
      const dim3 grid(unsigned(std::min<int64_t>((tiles + kCrews - 1) / kCrews, ctx_->sm_count)));
      launch("matmul: quantized gemv (integer)", kernel, grid, dim3(kCrews * kCrewThreads),
             size_t(shared_bytes<Bits, G>(K)),
             args, x, K);
    };
    using std::false_type, std::true_type;
    if (q.scales.dtype() != DType::bf16) return go(false_type{}, false_type{});
    if constexpr (pairs_possible<Bits, G, true>())
      if ((K / G) % 2 == 0) return go(true_type{}, true_type{});
    go(true_type{}, false_type{});
  });
}

}  // namespace fathom::cuda
