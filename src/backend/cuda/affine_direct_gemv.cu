// Decode matmuls of one or two rows of x over 8-bit MLX affine codes in
// groups of 64 or 128 values and 4-bit codes in groups of 128, in bf16
// compute: the codes go from global memory straight into the mma's A
// fragments (how codes and x meet in the mma: affine_mma.h). One row of x
// goes to affine_plane_gemv.cu where its planes fit in shared memory.
//
// A step is one group of 16 weight rows: lane (g, t) = (lane / 4, lane % 4)
// loads its quarter t of the group's words in rows g and g + 8 with one
// vector load each (a quad reads whole 32-byte sectors), several steps ahead
// in registers, and x, staged once per block in shared memory already
// rounded and paired, is one shared load a word. The four lanes t of an mma
// read one group, so the mma's sums are a group's, scaled and offset as on
// the CPU: y += scale·Σ x·q + bias·Σ x, with Σ x per group (of the rounded
// x) staged beside x. Against the shared-memory ring of affine_mma_gemv.cu
// (~35 instructions a 16×16 mma, half of them moving codes and setting up
// chunks) this issues fewer per byte while a step holds 1 KiB of codes or
// more; for narrower groups its steps' fixed work costs more than the ring's,
// which keeps them (bench/RESULTS.md: both measured per width and group).
// The bytes in flight set the pace: registers for 8 steps of 4-bit codes
// in two blocks a multiprocessor beat half as many in three, and beat a
// ring of async copies of the same steps (more bytes in flight, slower).
//
// A block is 8 warps on one tile of 16 rows at a time; the grid is as many
// blocks as are resident, each going through tiles in turn. In a tile, warp
// w takes groups w, w + 8, ... (the block's warps read neighbouring bytes);
// its loads run on across the end of a tile into the next, and the warps'
// sums of a tile meet in shared memory (double-buffered: one barrier a tile).
#include <algorithm>
#include <type_traits>

#include "backend/cuda/affine_launch.h"
#include "backend/cuda/affine_mma.h"
#include "backend/cuda/cuda_backend.h"

namespace fathom::cuda {
namespace {

using affine::bf16_pair;
using affine::block_output;
using affine::code_pair;
using affine::kCodeOffset;
using affine::Launch;
using affine::load_codes;
using affine::load_param;
using affine::mma_bf16;
using affine::Output;
using affine::param_float;
using affine::ParamType;
using affine::times16;

constexpr int kTileRows = 16;  // weight rows per tile: the mma's M
constexpr int kWarps = 8;
constexpr int kMaxRows = 2;  // rows of x
// Blocks a multiprocessor: the registers asked of the compiler
// (__launch_bounds__) and the shared memory a block may take
// (kMaxSharedBytes) both leave room for this many, so the grid is this many
// times the multiprocessors.
constexpr int kBlocksPerSm = 2;
// 228 KiB of shared memory on Hopper, 1 KiB of it reserved a block.
constexpr int64_t kMaxSharedBytes = 228 * 1024 / kBlocksPerSm - 1024;

// x of one word of codes, rounded and paired: 4 pairs (uint4) at 4 bits, 2
// (uint2) at 8.
template <int Bits>
using XPiece = std::conditional_t<Bits == 4, uint4, uint2>;

template <int Bits, int Group>
struct Shape {
  static constexpr int kGroupWords = Group * Bits / 32;  // a row's words of a group
  static constexpr int kLaneWords = kGroupWords / 4;     // lane t's quarter of them
  // Steps a lane has loaded ahead: about 64 registers of codes and
  // parameters (two blocks a multiprocessor), at least two steps so that one
  // is in flight while one is multiplied. The bytes in flight set this
  // kernel's pace: half the registers in three blocks were 2% slower at 8
  // bits in groups of 64 and 9% at 4 bits in groups of 64 (bench/RESULTS.md).
  static constexpr int kAhead = std::max(2, 64 / (2 * kLaneWords + 4));
};

// x's row stride in shared memory, in pieces (one per word of codes): one
// more than a row's, so that the two rows' pieces fall on other banks.
template <int Bits>
__host__ __device__ constexpr int64_t x_row_pieces(int64_t K) {
  return K * Bits / 32 + 1;
}

// What a launch's shared memory holds: x's rows, then Σ x per group (float2:
// rows 0 and 1), then the warps' sums of a tile (two buffers).
template <int Bits>
struct SharedLayout {
  int64_t sums_at, partial_at, bytes;
  __host__ __device__ SharedLayout(int64_t K, int64_t groups, int M) {
    sums_at = (M * x_row_pieces<Bits>(K) * int64_t(sizeof(XPiece<Bits>)) + 15) / 16 * 16;
    partial_at = sums_at + groups * 8;
    bytes = partial_at + 2 * kWarps * kTileRows * kMaxRows * 4;
  }
};

// One step's loads: a lane's words of the group in rows g and g + 8, and
// the raw bits of those rows' scales and biases.
template <int Bits, int Group>
struct StepLoads {
  uint32_t a[Shape<Bits, Group>::kLaneWords], b[Shape<Bits, Group>::kLaneWords];
  uint32_t scale_a, scale_b, bias_a, bias_b;
};

// Where the loads of one tile come from: rows g and g + 8 (the last row for
// rows past the output's end).
struct TileSource {
  const uint32_t* row_a;
  const uint32_t* row_b;
  uint32_t param_a, param_b;  // index of the rows' first group's scale
  const void* scales;
  const void* biases;
  ParamType params;

  __device__ __forceinline__ void set(const Output& o, int64_t n0, int64_t row_words, int64_t groups, int g, int t,
                                      int lane_words) {
    const int64_t last = o.n - 1, ra = std::min(n0 + g, last), rb = std::min(n0 + g + 8, last);
    row_a = o.codes + ra * row_words + t * lane_words;
    row_b = o.codes + rb * row_words + t * lane_words;
    param_a = uint32_t(ra * groups), param_b = uint32_t(rb * groups);
    scales = o.scales, biases = o.biases, params = o.params;
  }
};

template <int Bits, int Group, bool Bf16Params>
__device__ __forceinline__ void load_step(StepLoads<Bits, Group>& s, const TileSource& src, uint32_t group) {
  using S = Shape<Bits, Group>;
  load_codes<S::kLaneWords>(src.row_a + group * S::kGroupWords, s.a);
  load_codes<S::kLaneWords>(src.row_b + group * S::kGroupWords, s.b);
  s.scale_a = load_param<Bf16Params>(src.scales, src.params, src.param_a + group);
  s.scale_b = load_param<Bf16Params>(src.scales, src.params, src.param_b + group);
  s.bias_a = load_param<Bf16Params>(src.biases, src.params, src.param_a + group);
  s.bias_b = load_param<Bf16Params>(src.biases, src.params, src.param_b + group);
}

// x's M rows into shared memory, rounded to bf16 and paired as the mma takes
// them (a piece per word of codes), and Σ x per group of the rounded values.
// A thread takes 8 values a pass; the loads of kBatch passes go out
// together (x is in L2: one wait a batch, not a pass). Every lane of a warp
// runs every pass (the sums meet by shuffles).
template <int Bits, int Group>
__device__ void stage_x(const float* __restrict__ x, int M, int64_t K, XPiece<Bits>* xs, float2* sums) {
  constexpr int kValues = 8, kLanesPerGroup = Group / kValues, kBatch = 2;
  const int64_t per_row = K / kValues, total = M * per_row, row_pieces = x_row_pieces<Bits>(K);
  for (int64_t batch = 0; batch < total; batch += kBatch * blockDim.x) {
    float4 v[kBatch][2];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t e = batch + i * blockDim.x + threadIdx.x;
      v[i][0] = v[i][1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (e < total) {
        const float4* src = reinterpret_cast<const float4*>(x + e / per_row * K + e % per_row * kValues);
        v[i][0] = __ldg(src), v[i][1] = __ldg(src + 1);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t e = batch + i * blockDim.x + threadIdx.x;
      if (batch + i * blockDim.x >= total) break;  // the same for the whole block
      const bool live = e < total;
      const int64_t r = live ? e / per_row : 0, p = live ? e % per_row : 0;
      const float4 lo = v[i][0], hi = v[i][1];
      uint32_t pairs[4];
      if constexpr (Bits == 4) {
        pairs[0] = bf16_pair(lo.x, hi.x), pairs[1] = bf16_pair(lo.y, hi.y);
        pairs[2] = bf16_pair(lo.z, hi.z), pairs[3] = bf16_pair(lo.w, hi.w);
        if (live) xs[r * row_pieces + p] = uint4{pairs[0], pairs[1], pairs[2], pairs[3]};
      } else {  // two words of 4 values
        pairs[0] = bf16_pair(lo.x, lo.z), pairs[1] = bf16_pair(lo.y, lo.w);
        pairs[2] = bf16_pair(hi.x, hi.z), pairs[3] = bf16_pair(hi.y, hi.w);
        if (live) {
          xs[r * row_pieces + 2 * p] = uint2{pairs[0], pairs[1]};
          xs[r * row_pieces + 2 * p + 1] = uint2{pairs[2], pairs[3]};
        }
      }
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        sum += __uint_as_float(pairs[j] << 16) + __uint_as_float(pairs[j] & 0xffff0000u);
#pragma unroll
      for (int s = 1; s < kLanesPerGroup; s <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, s);
      if (live && p % kLanesPerGroup == 0) reinterpret_cast<float*>(sums + p / kLanesPerGroup)[r] = sum;
    }
  }
}

template <int Bits, int Group, bool Bf16Params>
__global__ void __launch_bounds__(32 * kWarps, kBlocksPerSm)
    affine_direct_gemv_kernel(const __grid_constant__ Launch launch, const float* __restrict__ x, int M, int64_t K) {
  using S = Shape<Bits, Group>;
  using X = XPiece<Bits>;
  constexpr int LW = S::kLaneWords, Ahead = S::kAhead;
  extern __shared__ uint4 shared_words[];
  const int64_t groups = K / Group, row_words = K * Bits / 32, row_pieces = x_row_pieces<Bits>(K);
  const SharedLayout<Bits> layout(K, groups, M);
  auto* xs = reinterpret_cast<X*>(shared_words);
  auto* sums = reinterpret_cast<float2*>(reinterpret_cast<char*>(shared_words) + layout.sums_at);
  auto* partial = reinterpret_cast<float(*)[kWarps][kTileRows][kMaxRows]>(reinterpret_cast<char*>(shared_words) +
                                                                           layout.partial_at);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  // This block's tiles: blockIdx.x, + gridDim.x, ...; in each, this warp's
  // groups warp, warp + kWarps, ...: `mine` of them. Steps run tile after
  // tile.
  const int64_t tiles = launch.first_block[launch.count];
  const int my_tiles = blockIdx.x < tiles ? int((tiles - 1 - blockIdx.x) / gridDim.x) + 1 : 0;
  const int mine = warp < groups ? int((groups - 1 - warp) / kWarps) + 1 : 0;
  const int steps = my_tiles * mine;
  const auto tile_of = [&](int i) { return int64_t(blockIdx.x) + int64_t(i) * gridDim.x; };

  // The load side: the next step to load, its tile's sources.
  TileSource src;
  int load_tile = 0, load_chunk = 0;
  const auto load_next = [&](StepLoads<Bits, Group>& s) {
    if (load_chunk == 0) {
      int64_t first;
      const Output& o = block_output(launch, tile_of(load_tile), first);
      src.set(o, (tile_of(load_tile) - first) * kTileRows, row_words, groups, g, t, LW);
    }
    load_step<Bits, Group, Bf16Params>(s, src, uint32_t(warp + load_chunk * kWarps));
    if (++load_chunk == mine) load_chunk = 0, ++load_tile;
  };
  StepLoads<Bits, Group> ring[Ahead];
  // Weights only: these loads run while the kernel before this one ends.
#pragma unroll
  for (int i = 0; i < Ahead; ++i)
    if (i < steps) load_next(ring[i]);
  await_previous_kernel();
  stage_x<Bits, Group>(x, M, K, xs, sums);
  __syncthreads();

  // This lane's x row (lanes past M multiply zeros) from its quarter t of
  // each group on.
  const X* xrow = xs + (g < M ? g : 0) * row_pieces + t * LW;
  const bool has_x = g < M;
  float acc[4] = {};
  int tile = 0, chunk = 0;
  // The warps' sums of a tile meet in partial[tile % 2]: the next tile's go
  // to the other buffer, which the reads below are done with before any
  // warp is past the next barrier.
  const auto finish_tile = [&] {
    auto& part = partial[tile % 2];
    if (2 * t < kMaxRows) {
      part[warp][g][2 * t] = acc[0], part[warp][g][2 * t + 1] = acc[1];
      part[warp][g + 8][2 * t] = acc[2], part[warp][g + 8][2 * t + 1] = acc[3];
    }
    __syncthreads();
    if (threadIdx.x < kTileRows * M) {
      int64_t first;
      const Output& o = block_output(launch, tile_of(tile), first);
      const int row = threadIdx.x % kTileRows, col = threadIdx.x / kTileRows;
      const int64_t n = (tile_of(tile) - first) * kTileRows + row;
      if (n < o.n) {
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) v += part[w][row][col];
        o.y[col * o.n + n] = v + (o.bias ? o.bias[n] : 0.0f);
      }
    }
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    ++tile;
  };

  for (int base = 0; base < steps; base += Ahead) {
#pragma unroll
    for (int i = 0; i < Ahead; ++i) {
      if (base + i >= steps) break;
      StepLoads<Bits, Group>& s = ring[i];
      const uint32_t group = warp + chunk * kWarps;
      float part[4] = {};
#pragma unroll
      for (int j = 0; j < LW; ++j) {
        X v{};
        if (has_x) v = xrow[group * S::kGroupWords + j];
        uint32_t b[2][2];
        if constexpr (Bits == 4)
          b[0][0] = v.x, b[0][1] = v.y, b[1][0] = v.z, b[1][1] = v.w;
        else
          b[0][0] = v.x, b[0][1] = times16(v.x), b[1][0] = v.y, b[1][1] = times16(v.y);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t a[4] = {code_pair(s.a[j], 8 * h), code_pair(s.b[j], 8 * h), code_pair(s.a[j], 8 * h + 4),
                                 code_pair(s.b[j], 8 * h + 4)};
          mma_bf16(part, a, b[h]);
        }
      }
      // C holds rows g, g + 8 (of the weight tile) × rows 2t, 2t + 1 of x.
      // src.params is the load side's, which may be a tile ahead: a launch's
      // outputs share one dtype of scales (affine_direct_gemv checks).
      const float sa = param_float<Bf16Params>(s.scale_a, src.params),
                  sb = param_float<Bf16Params>(s.scale_b, src.params);
      const float ba = fmaf(-kCodeOffset<Bits>, sa, param_float<Bf16Params>(s.bias_a, src.params));
      const float bb = fmaf(-kCodeOffset<Bits>, sb, param_float<Bf16Params>(s.bias_b, src.params));
      const float2 xsum = sums[group];
      acc[0] = fmaf(sa, part[0], fmaf(ba, xsum.x, acc[0]));
      acc[1] = fmaf(sa, part[1], fmaf(ba, xsum.y, acc[1]));
      acc[2] = fmaf(sb, part[2], fmaf(bb, xsum.x, acc[2]));
      acc[3] = fmaf(sb, part[3], fmaf(bb, xsum.y, acc[3]));
      if (base + i + Ahead < steps) load_next(s);
      if (++chunk == mine) chunk = 0, finish_tile();
    }
  }
  // A warp with no groups (K of fewer than kWarps groups) still meets the
  // block at each tile's barrier.
  if (mine == 0)
    while (tile < my_tiles) finish_tile();
}

}  // namespace

bool CudaBackend::affine_direct_suits(int64_t M, int64_t K, int bits, int group) {
  // Steps of at least 1 KiB of codes (16 rows of a group): with less the
  // ring kernel measured faster (8B shape, one row: 4-bit groups of 32 212
  // against 268 tok/s, of 64 311 against 318; 8-bit groups of 32 190
  // against 194), with more this one (4-bit groups of 128 362 against 324,
  // 8-bit groups of 64 256 against 215).
  if (M < 1 || M > kMaxRows || (bits != 4 && bits != 8) || bits * group < 512) return false;
  const int64_t bytes =
      bits == 4 ? SharedLayout<4>(K, K / group, int(M)).bytes : SharedLayout<8>(K, K / group, int(M)).bytes;
  return bytes <= kMaxSharedBytes;
}

void CudaBackend::affine_direct_gemv(const float* x, int64_t M, int64_t K,
                                     std::span<const MatmulTarget* const> targets) {
  const AffineQuant& q = targets.front()->w->affine_quant();
  check(affine_direct_suits(M, K, q.bits, q.group_size), "matmul: the direct quantized GEMV takes 1 to ", kMaxRows,
        " rows of 8-bit codes in groups of 64 or 128, or 4-bit in groups of 128, whose x fits ", kMaxSharedBytes,
        " bytes of shared memory; got ", M, " rows of K ", K, " at ", q.bits, " bits in groups of ", q.group_size);
  check(K % q.group_size == 0, "matmul: the direct quantized GEMV takes whole groups, got K ", K, " in groups of ",
        q.group_size);
  const Launch args = affine::gather_outputs(targets, K, kTileRows, "direct");
  const int64_t tiles = args.first_block[args.count];
  const auto go = [&]<int Bits, int G, bool Bf16Params>(std::integral_constant<int, Bits>, std::integral_constant<int, G>,
                                                        std::bool_constant<Bf16Params>) {
    constexpr auto kernel = affine_direct_gemv_kernel<Bits, G, Bf16Params>;
    const size_t bytes = size_t(SharedLayout<Bits>(K, K / G, int(M)).bytes);
    affine::allow_shared_bytes<kernel>(ctx_->device, kMaxSharedBytes, "matmul: quantized gemv (direct)");
    const dim3 grid(unsigned(std::min<int64_t>(tiles, int64_t(kBlocksPerSm) * ctx_->sm_count)));
    launch("matmul: quantized gemv (direct)", kernel, grid, dim3(32 * kWarps), bytes, args, x, int(M), K);
  };
  const auto with_params = [&](auto bits, auto group) {
    if (q.scales.dtype() == DType::bf16) go(bits, group, std::true_type{});
    else go(bits, group, std::false_type{});
  };
  using std::integral_constant;
  if (q.bits == 4) with_params(integral_constant<int, 4>{}, integral_constant<int, 128>{});
  else if (q.group_size == 64) with_params(integral_constant<int, 8>{}, integral_constant<int, 64>{});
  else with_params(integral_constant<int, 8>{}, integral_constant<int, 128>{});
}

}  // namespace fathom::cuda
