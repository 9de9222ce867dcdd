// Decode matmuls of 1-16 rows of x over 4- and 8-bit MLX affine codes in
// bf16 compute, on the tensor cores (one row goes to affine_plane_gemv.cu
// and two rows of wide groups to affine_direct_gemv.cu where their x fits
// in shared memory). How codes and x enter the mma:
// affine_mma.h.
//
// A block is 8 warps (4 where x takes much room: Layout); the grid is as
// many blocks as are resident at once, each going through tiles of 16
// weight rows in turn. In a tile, K is cut into chunks of U groups (128
// bytes of each row) dealt to the warps in turn. Each warp keeps a ring of
// chunks in shared memory, filled by async copies a few chunks ahead and
// across the end of a tile into the next: the bytes in flight, which set
// the pace of a read-once kernel, cost no registers, and a copy reads whole
// lines. Scales and biases are loaded a step before they are converted, x a
// step before it is staged, and a lane's sources are set once a tile: the
// instructions per code, not the bytes, were the limit (bench/RESULTS.md).
// Lane (g, t) = (lane / 4, lane % 4) takes rows g and g + 8 of the tile,
// and in each group t's quarter of each row.
#include <algorithm>
#include <atomic>
#include <type_traits>

#include "backend/cuda/affine_launch.h"
#include "backend/cuda/affine_mma.h"
#include "backend/cuda/async_copy.h"
#include "backend/cuda/bf16_vectors.h"
#include "backend/cuda/cuda_backend.h"

namespace fathom::cuda {
namespace {

using affine::bf16_pair;
using affine::block_output;
using affine::code_pair;
using affine::kCodeOffset;
using affine::Launch;
using affine::mma_bf16;
using affine::Output;
using affine::param_bits;
using affine::param_value;
using affine::ParamType;
using affine::times16;

constexpr int kTileRows = 16;     // weight rows per block: the mma's M
constexpr int kWordsInFlight = 8;  // code words of each of a lane's two rows per chunk: 128 bytes a row

template <int Bits, int Group>
struct Shape {
  static constexpr int kGroupWords = Group * Bits / 32;
  static constexpr int kWords = kGroupWords / 4;  // a lane's share of a group's row
  static constexpr int kChunkGroups = kWords >= kWordsInFlight ? 1 : kWordsInFlight / kWords;
  static constexpr int kChunkValues = kChunkGroups * Group;
};

// A warp's ring of chunks in shared memory. A chunk is U groups of the
// tile's 16 rows: each row's codes are kSegs 16-byte pieces, contiguous in
// memory and copied whole, so a warp's copy reads full lines. Piece p of row
// r sits at p ^ (r % 8): the lanes of a quad read one piece of eight rows at
// once, which would otherwise all fall on the same banks.
template <int Bits, int Group, int Stages>
struct Ring {
  using S = Shape<Bits, Group>;
  static constexpr int kSegs = S::kChunkGroups * S::kGroupWords / 4;  // pieces of a row per chunk
  static constexpr int kParams = 2 * kTileRows * S::kChunkGroups;     // scales then biases
  uint4 codes[Stages][kTileRows * kSegs];
  float params[Stages][kParams];

  __device__ __forceinline__ const uint32_t* word(int stage, int row, int w) const {
    const int p = (w / 4) ^ (row % 8);
    return reinterpret_cast<const uint32_t*>(&codes[stage][row * kSegs + p]) + w % 4;
  }
  // Words w .. w + N - 1 of a row (N = 1, 2, 4 or 8, w a multiple of N), in
  // one load a piece.
  template <int N>
  __device__ __forceinline__ void words(int stage, int row, int w, uint32_t (&out)[N]) const {
    static_assert(N == 1 || N == 2 || N % 4 == 0);
    if constexpr (N % 4 == 0) {
#pragma unroll
      for (int i = 0; i < N; i += 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(word(stage, row, w + i));
        out[i] = v.x, out[i + 1] = v.y, out[i + 2] = v.z, out[i + 3] = v.w;
      }
    } else if constexpr (N == 2) {
      const uint2 v = *reinterpret_cast<const uint2*>(word(stage, row, w));
      out[0] = v.x, out[1] = v.y;
    } else {
      out[0] = *word(stage, row, w);
    }
  }
};

// A warp's chunk of x (rows < XRows), rounded to bf16 and paired as the
// mmas take it: 8 values a piece, a piece more a row so that rows fall on
// other banks. Row XRows stays zero: the lanes whose rows of x are past M
// read it, so that every lane loads its B fragments the same way.
template <int Bits, int Group, int XRows>
struct XChunk {
  static constexpr int kPieces = Shape<Bits, Group>::kChunkValues / 8 + 1;
  uint4 pieces[XRows + 1][kPieces];
};

// A kernel for up to XRows rows of x: the mma's 8 columns once or twice,
// and chunks in a warp's ring as leave room for two blocks on a
// multiprocessor.
template <int XRows>
struct Rows {
  static constexpr int kTiles = XRows > 8 ? 2 : 1, kCols = 8 * kTiles, kStages = XRows <= 2 ? 4 : 3;
};

template <int Bits, int Group, int XRows, int Warps>
struct SharedMemory {
  using X = Rows<XRows>;
  Ring<Bits, Group, X::kStages> ring[Warps];
  XChunk<Bits, Group, XRows> x[Warps];
  float sums[Warps][Shape<Bits, Group>::kChunkGroups][X::kCols];
  float partial[2][Warps][kTileRows][X::kCols];
};

// 8 warps a block where two such blocks fit in a multiprocessor's shared
// memory (228 KiB, 1 KiB of it reserved a block), else 4: x's chunks grow
// with its rows, and 16 rows at 4 bits take 8 warps past it (measured: 787
// tok/s at batch 16 against 965 with 4 warps, bench/RESULTS.md).
template <int Bits, int Group, int XRows>
struct Layout {
  static constexpr int kWarps = 2 * (sizeof(SharedMemory<Bits, Group, XRows, 8>) + 1024) <= 228 * 1024 ? 8 : 4;
  static constexpr size_t kSharedBytes = sizeof(SharedMemory<Bits, Group, XRows, kWarps>);
};
static_assert(Layout<4, 64, 2>::kWarps == 8 && Layout<4, 64, 16>::kWarps == 4 && Layout<8, 64, 16>::kWarps == 8,
              "the layouts measured in bench/RESULTS.md");

// Where a lane's copies and parameter loads for one tile come from: the
// word offset of each of its pieces and the index of each of its scales or
// biases in chunk 0, rows past the output's end reading its last row. Fixed
// for the tile, so that a step adds only its chunk's offset (32 bits:
// affine_mma_gemv checks that every offset fits).
template <int Bits, int Group>
struct TileSource {
  using S = Shape<Bits, Group>;
  static constexpr int kSegs = Ring<Bits, Group, 1>::kSegs, kPieces = kTileRows * kSegs / 32;
  static_assert(kTileRows * kSegs % 32 == 0);
  Output o;
  uint32_t piece[kPieces];
  uint32_t param[S::kChunkGroups];
  uint32_t last_param;  // parameters past a row's last group read its next row's, or this one

  __device__ __forceinline__ void set(const Launch& l, int64_t tile, uint32_t row_words, uint32_t groups, int lane) {
    constexpr int U = S::kChunkGroups;
    int64_t first;
    o = block_output(l, tile, first);
    const uint32_t n0 = uint32_t(tile - first) * kTileRows, last_row = uint32_t(o.n - 1);
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      const int i = lane + 32 * j, row = i / kSegs, p = i % kSegs;
      piece[j] = std::min(n0 + row, last_row) * row_words + 4 * p;
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int e = lane + 32 * j, row = e / U % kTileRows, u = e % U;
      param[j] = std::min(n0 + row, last_row) * groups + u;
    }
    last_param = (last_row + 1) * groups - 1;
  }
};

// Starts the copy of chunk c's codes for the tile's rows into `stage`.
// Pieces past the end of a row (a last chunk of fewer than U groups) are
// zeros.
template <int Bits, int Group, int Stages>
__device__ __forceinline__ void copy_chunk(Ring<Bits, Group, Stages>& ring, int stage,
                                           const TileSource<Bits, Group>& src, uint32_t row_words, uint32_t c,
                                           int lane) {
  using T = TileSource<Bits, Group>;
  const uint32_t w0 = c * T::kSegs * 4;
  const bool whole = w0 + T::kSegs * 4 <= row_words;
#pragma unroll
  for (int j = 0; j < T::kPieces; ++j) {
    const int i = lane + 32 * j, row = i / T::kSegs, p = i % T::kSegs;
    const bool inside = whole || w0 + 4 * p < row_words;
    copy_async16(&ring.codes[stage][row * T::kSegs + (p ^ (row % 8))], src.o.codes + (inside ? src.piece[j] + w0 : 0),
                 inside ? 16 : 0);
  }
}

// Chunk c's scales and biases, U per lane: their bits loaded now, made
// floats and stored to the ring a step later (store_params), when they have
// arrived.
template <int Bits, int Group>
__device__ __forceinline__ void load_params(uint32_t (&v)[Shape<Bits, Group>::kChunkGroups],
                                            const TileSource<Bits, Group>& src, uint32_t c, int lane) {
  constexpr int U = Shape<Bits, Group>::kChunkGroups;
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const bool bias = (lane + 32 * j) / (kTileRows * U) != 0;
    v[j] = param_bits(bias ? src.o.biases : src.o.scales, src.o.params, std::min(src.param[j] + c * U, src.last_param));
  }
}
template <int Bits, int Group, int Stages>
__device__ __forceinline__ void store_params(Ring<Bits, Group, Stages>& ring, int stage,
                                             const uint32_t (&v)[Shape<Bits, Group>::kChunkGroups], ParamType type,
                                             int lane) {
#pragma unroll
  for (int j = 0; j < Shape<Bits, Group>::kChunkGroups; ++j)
    ring.params[stage][lane + 32 * j] = param_value(v[j], type);
}

// A chunk's x for rows r < M goes to xc, rounded to bf16 and paired for the
// mmas, and sums[u][r] = Σ x[r, k] over its group u (of the rounded values),
// a group's lanes meeting by shuffles.
//
// A 4-bit word's fields at bits s and s + 16 meet values s / 4 and s / 4 + 4
// of its 8: a piece is the pairs (0, 4), (1, 5), (2, 6), (3, 7). An 8-bit
// word's meet bytes s / 8 and s / 8 + 2, the high halves 16 times them: a
// piece is two words' pairs (0, 2), (1, 3), the 16 applied when it is read.
//
// A pass takes kRowsPerPass rows of x, 8 values a lane: its loads (load_x)
// can go out a step before its rounding and stores (store_x) where x's rows
// are few enough to wait in registers (kAhead), and right before otherwise.
template <int Bits, int Group, int XRows>
struct XPasses {
  static constexpr int kLanesPerRow = Shape<Bits, Group>::kChunkValues / 8, kRowsPerPass = 32 / kLanesPerRow;
  static_assert(kLanesPerRow <= 32 && 32 % kLanesPerRow == 0);
  static constexpr int kPasses = (XRows + kRowsPerPass - 1) / kRowsPerPass;
  static constexpr bool kAhead = kPasses <= 2;
  float4 v[kAhead ? kPasses : 1][2];
};

template <int Bits, int Group, int XRows>
__device__ __forceinline__ void load_x_pass(float4 (&v)[2], const float* x, int M, int64_t K, int64_t g0,
                                            int64_t groups, int pass, int lane) {
  using P = XPasses<Bits, Group, XRows>;
  const int r = pass * P::kRowsPerPass + lane / P::kLanesPerRow, piece = lane % P::kLanesPerRow,
            u = piece * 8 / Group;
  v[0] = v[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (r < M && g0 + u < groups) {
    const float4* p = reinterpret_cast<const float4*>(x + r * K + g0 * Group + piece * 8);
    v[0] = __ldg(p), v[1] = __ldg(p + 1);
  }
}

template <int Bits, int Group, int XRows, int Cols>
__device__ __forceinline__ void store_x_pass(const float4 (&in)[2], int M, int pass, int lane,
                                             XChunk<Bits, Group, XRows>& xc, float (*sums)[Cols]) {
  using P = XPasses<Bits, Group, XRows>;
  const int r = pass * P::kRowsPerPass + lane / P::kLanesPerRow, piece = lane % P::kLanesPerRow,
            u = piece * 8 / Group;
  // Rounded as they are paired; the sums take the rounded values back out
  // of the pairs: pair i holds values first(i) and first(i) + apart.
  const uint4 pairs = Bits == 4 ? uint4{bf16_pair(in[0].x, in[1].x), bf16_pair(in[0].y, in[1].y),
                                        bf16_pair(in[0].z, in[1].z), bf16_pair(in[0].w, in[1].w)}
                                : uint4{bf16_pair(in[0].x, in[0].z), bf16_pair(in[0].y, in[0].w),
                                        bf16_pair(in[1].x, in[1].z), bf16_pair(in[1].y, in[1].w)};
  const uint32_t words[4] = {pairs.x, pairs.y, pairs.z, pairs.w};
  constexpr int apart = Bits == 4 ? 4 : 2;
  float v[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int first = Bits == 4 ? i : i % 2 + 4 * (i / 2);
    v[first] = __uint_as_float(words[i] << 16), v[first + apart] = __uint_as_float(words[i] & 0xffff0000u);
  }
  float sum = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
  if (r < M) xc.pieces[r][piece] = pairs;
#pragma unroll
  for (int s = 1; s < Group / 8; s <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, s);
  if (r < M && lane % (Group / 8) == 0) sums[u][r] = sum;
}

template <int Bits, int Group, int XRows>
__device__ __forceinline__ void load_x(XPasses<Bits, Group, XRows>& xp, const float* x, int M, int64_t K, int64_t g0,
                                       int64_t groups, int lane) {
  using P = XPasses<Bits, Group, XRows>;
  if constexpr (P::kAhead) {
#pragma unroll
    for (int pass = 0; pass < P::kPasses; ++pass)
      if (pass * P::kRowsPerPass < M) load_x_pass<Bits, Group, XRows>(xp.v[pass], x, M, K, g0, groups, pass, lane);
  }
}

// Chunk g0's x into xc and sums: from the loads of load_x (kAhead), or
// loaded now.
template <int Bits, int Group, int XRows, int Cols>
__device__ __forceinline__ void store_x(XPasses<Bits, Group, XRows>& xp, const float* x, int M, int64_t K, int64_t g0,
                                        int64_t groups, int lane, XChunk<Bits, Group, XRows>& xc,
                                        float (*sums)[Cols]) {
  using P = XPasses<Bits, Group, XRows>;
#pragma unroll
  for (int pass = 0; pass < P::kPasses; ++pass) {
    if (pass * P::kRowsPerPass >= M) break;
    if constexpr (P::kAhead) {
      store_x_pass<Bits, Group, XRows, Cols>(xp.v[pass], M, pass, lane, xc, sums);
    } else {
      load_x_pass<Bits, Group, XRows>(xp.v[0], x, M, K, g0, groups, pass, lane);
      store_x_pass<Bits, Group, XRows, Cols>(xp.v[0], M, pass, lane, xc, sums);
    }
  }
}

// Two blocks a multiprocessor, as their shared memory was sized for: registers
// must not leave room for fewer.
template <int Bits, int Group, int XRows>
__global__ void __launch_bounds__(32 * Layout<Bits, Group, XRows>::kWarps, 2)
    affine_mma_gemv_kernel(const __grid_constant__ Launch launch, const float* __restrict__ x, int M, int64_t K) {
  using S = Shape<Bits, Group>;
  constexpr int W = S::kWords, U = S::kChunkGroups, Tiles = Rows<XRows>::kTiles, Cols = Rows<XRows>::kCols,
                kStages = Rows<XRows>::kStages, kWarps = Layout<Bits, Group, XRows>::kWarps;
  extern __shared__ uint4 shared_words[];
  auto& sm = *reinterpret_cast<SharedMemory<Bits, Group, XRows, kWarps>*>(shared_words);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  auto& ring = sm.ring[warp];
  auto& xc = sm.x[warp];
  float(*sums)[Cols] = sm.sums[warp];
  const int64_t groups = K / Group, row_words = K * Bits / 32;
  const int chunks = int((groups + U - 1) / U);
  for (int i = lane; i < U * Cols; i += 32) sums[i / Cols][i % Cols] = 0.0f;  // rows ≥ M stay 0
  for (int i = lane; i < xc.kPieces; i += 32) xc.pieces[XRows][i] = make_uint4(0, 0, 0, 0);
  // This lane's B fragments, per tile of 8 rows of x: its row's pieces (the
  // zero row past M) from its quarter t of each group on.
  using XPiece = std::conditional_t<Bits == 4, uint4, uint2>;
  const XPiece* xrow[Tiles];
#pragma unroll
  for (int tile = 0; tile < Tiles; ++tile) {
    const int r = g + 8 * tile;
    xrow[tile] = reinterpret_cast<const XPiece*>(xc.pieces[r < M ? r : XRows]) + t * W;
  }
  // The block's tiles are blockIdx.x, + gridDim.x, ...; in each, this warp
  // takes chunks warp, warp + kWarps, ...: `mine` of them. Its steps run
  // through them tile after tile, so that its ring stays full across tiles.
  const int64_t tiles = launch.first_block[launch.count];
  const int my_tiles = blockIdx.x < tiles ? int((tiles - 1 - blockIdx.x) / gridDim.x) + 1 : 0;
  const int mine = warp < chunks ? (chunks - warp + kWarps - 1) / kWarps : 0;
  const int steps = my_tiles * mine;
  const auto tile_of = [&](int i) { return int64_t(blockIdx.x) + int64_t(i) * gridDim.x; };
  // Step s's copies start kStages - 1 steps ahead; its scales and biases are
  // loaded then and stored to the ring a step later, when they have arrived.
  // `next` is the step to start: its tile (whose sources it keeps) and its
  // place in the tile's chunks.
  uint32_t params[U];
  TileSource<Bits, Group> source;
  struct {
    int step = 0, tile = 0, chunk = 0;
  } next;
  const auto start_next = [&] {
    if (next.chunk == 0) source.set(launch, tile_of(next.tile), uint32_t(row_words), uint32_t(groups), lane);
    const uint32_t c = warp + next.chunk * kWarps;
    copy_chunk<Bits, Group>(ring, next.step % kStages, source, uint32_t(row_words), c, lane);
    load_params<Bits, Group>(params, source, c, lane);
    ++next.step;
    if (++next.chunk == mine) next.chunk = 0, ++next.tile;
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) {
      start_next();
      store_params<Bits, Group>(ring, s, params, source.o.params, lane);
    }
    commit_copies();
  }
  // The copies and parameters above read weights only: they run while the
  // kernel before this one finishes. x is its output.
  await_previous_kernel();
  XPasses<Bits, Group, XRows> xp;
  if (steps > 0) load_x<Bits, Group, XRows>(xp, x, M, K, int64_t(warp) * U, groups, lane);
  int k = 0;
  for (int i = 0; i < my_tiles; ++i) {
    int64_t first;
    const Output& o = block_output(launch, tile_of(i), first);
    const int64_t n0 = (tile_of(i) - first) * kTileRows;
    float acc[Tiles][4] = {};
    for (int kk = 0; kk < mine; ++kk, ++k) {
      const int ahead = k + kStages - 1;
      if (k >= 1 && ahead - 1 < steps)
        store_params<Bits, Group>(ring, (ahead - 1) % kStages, params, source.o.params, lane);
      if (ahead < steps) start_next();
      commit_copies();
      const int64_t g0 = int64_t(warp + kk * kWarps) * U;
      store_x<Bits, Group, XRows, Cols>(xp, x, M, K, g0, groups, lane, xc, sums);
      if (k + 1 < steps)  // the next step's chunk: this tile's next, or the next tile's first
        load_x<Bits, Group, XRows>(xp, x, M, K, int64_t(kk + 1 < mine ? warp + (kk + 1) * kWarps : warp) * U, groups,
                                   lane);
      wait_copies<kStages - 1>();  // step k's copies, this lane's
      __syncwarp();                // and every lane's, and the sums
      const int stage = k % kStages;
      const int groups_left = int(std::min<int64_t>(groups - g0, U));
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (u >= groups_left) break;
        float part[Tiles][4] = {};
        uint32_t wa[W], wb[W];  // this lane's words of the group in rows g and g + 8
        ring.template words<W>(stage, g, u * S::kGroupWords + t * W, wa);
        ring.template words<W>(stage, g + 8, u * S::kGroupWords + t * W, wb);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          // B for the word's two mmas, per tile of 8 rows of x.
          uint32_t b[Tiles][2][2];
#pragma unroll
          for (int tile = 0; tile < Tiles; ++tile) {
            const XPiece v = xrow[tile][u * S::kGroupWords + j];
            if constexpr (Bits == 4)
              b[tile][0][0] = v.x, b[tile][0][1] = v.y, b[tile][1][0] = v.z, b[tile][1][1] = v.w;
            else
              b[tile][0][0] = v.x, b[tile][0][1] = times16(v.x), b[tile][1][0] = v.y, b[tile][1][1] = times16(v.y);
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t a[4] = {code_pair(wa[j], 8 * h), code_pair(wb[j], 8 * h), code_pair(wa[j], 8 * h + 4),
                                   code_pair(wb[j], 8 * h + 4)};
#pragma unroll
            for (int tile = 0; tile < Tiles; ++tile) mma_bf16(part[tile], a, b[tile][h]);
          }
        }
        // C holds rows g, g + 8 (of the weight tile) × rows 2t, 2t + 1 of x.
        const float* p = ring.params[stage];
        const float sa = p[g * U + u], sb = p[(g + 8) * U + u];
        float ba = p[(kTileRows + g) * U + u], bb = p[(kTileRows + g + 8) * U + u];
        ba = fmaf(-kCodeOffset<Bits>, sa, ba);
        bb = fmaf(-kCodeOffset<Bits>, sb, bb);
#pragma unroll
        for (int tile = 0; tile < Tiles; ++tile) {
          const float2 xs = *reinterpret_cast<const float2*>(&sums[u][8 * tile + 2 * t]);
          acc[tile][0] = fmaf(sa, part[tile][0], fmaf(ba, xs.x, acc[tile][0]));
          acc[tile][1] = fmaf(sa, part[tile][1], fmaf(ba, xs.y, acc[tile][1]));
          acc[tile][2] = fmaf(sb, part[tile][2], fmaf(bb, xs.x, acc[tile][2]));
          acc[tile][3] = fmaf(sb, part[tile][3], fmaf(bb, xs.y, acc[tile][3]));
        }
      }
      __syncwarp();  // the stage, x and the sums are read before they are written again
    }
    // The warps' sums of tile i meet in partial[i % 2]: the next tile's go to
    // the other half, which the reads below are done with before any warp is
    // past the next barrier.
    auto& partial = sm.partial[i % 2];
#pragma unroll
    for (int tile = 0; tile < Tiles; ++tile) {
      const int col = 8 * tile + 2 * t;
      partial[warp][g][col] = acc[tile][0], partial[warp][g][col + 1] = acc[tile][1];
      partial[warp][g + 8][col] = acc[tile][2], partial[warp][g + 8][col + 1] = acc[tile][3];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kTileRows * Cols; e += blockDim.x) {
      const int row = e % kTileRows, col = e / kTileRows;
      const int64_t n = n0 + row;
      if (col >= M || n >= o.n) continue;
      float v = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v += partial[w][row][col];
      o.y[col * o.n + n] = v + (o.bias ? o.bias[n] : 0.0f);
    }
  }
}

void with_group(int group, auto&& f) {
  switch (group) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: fail("matmul: quantized groups of ", group, " values (32, 64 or 128)");
  }
}

}  // namespace

bool CudaBackend::affine_mma_suits(int64_t M, const Tensor& w, bool bf16_inputs) {
  // The rule of the contract (device_memory.h): these codes in this compute take 16 rows.
  return cuda_memory::affine_gemv_max_rows(w.affine_quant().bits, bf16_inputs) == cuda_memory::kAffineMmaGemvMaxRows &&
         M <= cuda_memory::kAffineMmaGemvMaxRows;
}

void CudaBackend::affine_mma_gemv(const float* x, int64_t M, int64_t K,
                                  std::span<const MatmulTarget* const> targets) {
  check(M >= 1 && M <= cuda_memory::kAffineMmaGemvMaxRows, "matmul: the tensor-core quantized GEMV takes 1 to 16 rows, got ", M);
  const AffineQuant& q = targets.front()->w->affine_quant();
  Launch args{};
  for (const MatmulTarget* t : targets) {
    const AffineQuant& tq = t->w->affine_quant();
    check(tq.bits == q.bits && tq.group_size == q.group_size && args.count < affine::kOutputs,
          "matmul: one tensor-core GEMV launch takes up to ", affine::kOutputs, " outputs of one code width and group");
    const int64_t words = t->w->dim(0) * K * tq.bits / 32;  // its offsets are 32 bits (TileSource)
    check(words <= int64_t(UINT32_MAX), "matmul: the tensor-core GEMV takes codes of up to 2^32 words, got ", words);
    affine::add_output(args, *t, kTileRows);
  }
  const int64_t tiles = args.first_block[args.count];
  with_group(q.group_size, [&](auto gs) {
    constexpr int G = decltype(gs)::value;
    const auto go = [&]<int Bits>(std::integral_constant<int, Bits>) {
      const auto run = [&]<int XRows>(std::integral_constant<int, XRows>) {
        using L = Layout<Bits, G, XRows>;
        const auto kernel = affine_mma_gemv_kernel<Bits, G, XRows>;
        const dim3 block(32 * L::kWarps);
        constexpr size_t bytes = L::kSharedBytes;
        // Past 48 KiB a kernel must ask for its shared memory, once on each
        // device; then the blocks that fit on a multiprocessor make the grid,
        // each going through tiles until they are done.
        static std::atomic<int> resident[64];
        std::atomic<int>& fit = resident[ctx_->device % 64];
        if (fit.load(std::memory_order_relaxed) == 0) {
          check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
                     "matmul: quantized gemv (tensor cores)");
          int n = 0;
          check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, int(block.x), bytes),
                     "matmul: quantized gemv (tensor cores)");
          fit.store(std::max(n, 1), std::memory_order_relaxed);
        }
        const int64_t slots = int64_t(fit.load(std::memory_order_relaxed)) * ctx_->sm_count;
        const dim3 grid(unsigned(std::min(tiles, slots)));
        launch("matmul: quantized gemv (tensor cores)", kernel, grid, block, bytes, args, x, int(M), K);
      };
      if (M <= 2) run(std::integral_constant<int, 2>{});
      else if (M <= 8) run(std::integral_constant<int, 8>{});
      else run(std::integral_constant<int, 16>{});
    };
    if (q.bits == 4) go(std::integral_constant<int, 4>{});
    else if (q.bits == 8) go(std::integral_constant<int, 8>{});
    else fail("matmul: the tensor-core GEMV takes 4- or 8-bit codes, got ", q.bits);
  });
}

}  // namespace fathom::cuda
