// Decode matmuls (1-16 rows of x) over 4- and 8-bit MLX affine codes in bf16
// compute, on the tensor cores.
//
// Why tensor cores for a GEMV: a code turned into a float and multiplied on
// the CUDA cores costs about four instructions, more at 4 bits than the SMs
// issue while the memory delivers the codes. Here a mask-and-or drops two
// codes into the mantissas of two bf16 128.0s and a paired subtraction of
// 128 leaves them as exact bf16 values; mma.sync multiplies 16 weight rows by
// up to 8 rows of x with exact products and f32 sums. An 8-bit code is two
// 4-bit halves, lo + 16·hi, the high half meeting 16·x (exact: a power of
// two). Per group of 32-128 values, y += scale·Σ x·q + bias·Σ x as on the
// CPU, x rounded to bf16 as bf16 compute rounds it.
//
// A block is 8 warps (4 where x takes much room: Layout) on one tile of 16
// weight rows; K is cut into chunks of U groups (128 bytes of each row)
// dealt to the warps in turn. Each warp keeps a ring of chunks in shared
// memory, filled by async copies a few chunks ahead: the bytes in flight,
// which set the pace of a read-once kernel, cost no registers, and a copy
// reads whole lines. Lane (g, t) =
// (lane / 4, lane % 4) takes rows g and g + 8 of the tile, and in each group
// t's quarter of each row. The order of k inside an mma is free as long as A
// and B agree: the mask takes the codes at bits s and s + 16 of a word (s =
// 0, 4, 8, 12), and x, staged per chunk in bf16, is paired to match.
#include <algorithm>
#include <atomic>

#include "backend/cuda/affine_launch.h"
#include "backend/cuda/bf16_vectors.h"
#include "backend/cuda/cuda_backend.h"

namespace fathom::cuda {
namespace {

using affine::block_output;
using affine::Launch;
using affine::Output;
using affine::param_at;

constexpr int kTileRows = 16;     // weight rows per block: the mma's M
constexpr int kWordsInFlight = 8;  // code words of each of a lane's two rows per chunk: 128 bytes a row

template <int Bits, int Group>
struct Shape {
  static constexpr int kGroupWords = Group * Bits / 32;
  static constexpr int kWords = kGroupWords / 4;  // a lane's share of a group's row
  static constexpr int kChunkGroups = kWords >= kWordsInFlight ? 1 : kWordsInFlight / kWords;
  static constexpr int kChunkValues = kChunkGroups * Group;
};

__device__ __forceinline__ uint32_t bf16_pair(float lo, float hi) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&p);
}

// The 4-bit fields at bits s and s + 16 of w as an exact bf16 pair (the
// first in the low half).
__device__ __forceinline__ uint32_t code_pair(uint32_t w, int s) {
  const uint32_t biased = ((w >> s) & 0x000f000fu) | 0x43004300u;  // 128 + field, twice
  const __nv_bfloat162 q =
      __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), __floats2bfloat162_rn(128.0f, 128.0f));
  return *reinterpret_cast<const uint32_t*>(&q);
}

// y += A·B over 16 weight rows × 16 k × 8 rows of x: bf16 products, f32 sums.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Async copies, global to shared, 16 bytes a lane (none past src_bytes:
// the rest of the 16 is filled with zeros).
__device__ __forceinline__ void copy_async16(void* dst, const void* src, int src_bytes) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;"); }
template <int Pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

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
};

// A warp's chunk of x (rows < XRows), rounded to bf16 and paired as the
// mmas take it: 8 values a piece, a piece more a row so that rows fall on
// other banks.
template <int Bits, int Group, int XRows>
struct XChunk {
  uint4 pieces[XRows][Shape<Bits, Group>::kChunkValues / 8 + 1];
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
  float partial[Warps][kTileRows][X::kCols];
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

// Starts the copy of chunk c's codes for the tile's rows into `stage`.
// Pieces past the end of a row (a last chunk of fewer than U groups) are
// zeros; rows past the end of the output read the last one again.
template <int Bits, int Group, int Stages>
__device__ __forceinline__ void copy_chunk(Ring<Bits, Group, Stages>& ring, int stage, const Output& o, int64_t n0,
                                           int64_t row_words, int64_t c, int lane) {
  using R = Ring<Bits, Group, Stages>;
  const int64_t w0 = c * R::kSegs * 4;
#pragma unroll
  for (int i = lane; i < kTileRows * R::kSegs; i += 32) {
    const int row = i / R::kSegs, p = i % R::kSegs;
    const uint32_t* src = o.codes + std::min(n0 + row, o.n - 1) * row_words;
    const bool inside = w0 + 4 * p < row_words;
    copy_async16(&ring.codes[stage][row * R::kSegs + (p ^ (row % 8))], inside ? src + w0 + 4 * p : src,
                 inside ? 16 : 0);
  }
}

// Chunk c's scales and biases, U per lane, loaded now and stored to the ring
// later (store_params), when they have arrived.
template <int Bits, int Group>
__device__ __forceinline__ void load_params(float (&v)[Shape<Bits, Group>::kChunkGroups], const Output& o,
                                            int64_t n0, int64_t groups, int64_t c, int lane) {
  constexpr int U = Shape<Bits, Group>::kChunkGroups;
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const int e = lane + 32 * j, tensor = e / (kTileRows * U), row = e / U % kTileRows, u = e % U;
    const int64_t n = std::min(n0 + row, o.n - 1), gi = std::min(c * U + u, groups - 1);
    v[j] = param_at(tensor ? o.biases : o.scales, o.params, n * groups + gi);
  }
}
template <int Bits, int Group, int Stages>
__device__ __forceinline__ void store_params(Ring<Bits, Group, Stages>& ring, int stage,
                                             const float (&v)[Shape<Bits, Group>::kChunkGroups], int lane) {
#pragma unroll
  for (int j = 0; j < Shape<Bits, Group>::kChunkGroups; ++j) ring.params[stage][lane + 32 * j] = v[j];
}

// Chunk g0's x for rows r < M: into xc, rounded to bf16 and paired for the
// mmas, and sums[u][r] = Σ x[r, k] over its group u (of the rounded values),
// 8 values a lane, a group's lanes meeting by shuffles.
//
// A 4-bit word's fields at bits s and s + 16 meet values s / 4 and s / 4 + 4
// of its 8: a piece is the pairs (0, 4), (1, 5), (2, 6), (3, 7). An 8-bit
// word's meet bytes s / 8 and s / 8 + 2, the high halves 16 times them: a
// piece is two words' pairs (0, 2), (1, 3), the 16 applied when it is read.
template <int Bits, int Group, int XRows, int Cols>
__device__ __forceinline__ void stage_x(const float* x, int M, int64_t K, int64_t g0, int64_t groups, int lane,
                                        XChunk<Bits, Group, XRows>& xc, float (*sums)[Cols]) {
  constexpr int kLanesPerRow = Shape<Bits, Group>::kChunkValues / 8, kRowsPerPass = 32 / kLanesPerRow;
  static_assert(kLanesPerRow <= 32 && 32 % kLanesPerRow == 0);
  for (int r0 = 0; r0 < M; r0 += kRowsPerPass) {
    const int r = r0 + lane / kLanesPerRow, piece = lane % kLanesPerRow, u = piece * 8 / Group;
    float sum = 0.0f;
    if (r < M && g0 + u < groups) {
      const float4* p = reinterpret_cast<const float4*>(x + r * K + g0 * Group + piece * 8);
      const float4 a = __ldg(p), b = __ldg(p + 1);
      const float v[8] = {round_bf16(a.x), round_bf16(a.y), round_bf16(a.z), round_bf16(a.w),
                          round_bf16(b.x), round_bf16(b.y), round_bf16(b.z), round_bf16(b.w)};
      sum = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
      if constexpr (Bits == 4)
        xc.pieces[r][piece] = {bf16_pair(v[0], v[4]), bf16_pair(v[1], v[5]), bf16_pair(v[2], v[6]), bf16_pair(v[3], v[7])};
      else
        xc.pieces[r][piece] = {bf16_pair(v[0], v[2]), bf16_pair(v[1], v[3]), bf16_pair(v[4], v[6]), bf16_pair(v[5], v[7])};
    }
#pragma unroll
    for (int s = 1; s < Group / 8; s <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, s);
    if (r < M && lane % (Group / 8) == 0) sums[u][r] = sum;
  }
}

// 16 times both halves of a bf16 pair (exact: a power of two).
__device__ __forceinline__ uint32_t times16(uint32_t pair) {
  const __nv_bfloat162 q =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&pair), __floats2bfloat162_rn(16.0f, 16.0f));
  return *reinterpret_cast<const uint32_t*>(&q);
}

template <int Bits, int Group, int XRows>
__global__ void __launch_bounds__(32 * Layout<Bits, Group, XRows>::kWarps)
    affine_mma_gemv_kernel(Launch launch, const float* __restrict__ x, int M, int64_t K) {
  using S = Shape<Bits, Group>;
  constexpr int W = S::kWords, U = S::kChunkGroups, Tiles = Rows<XRows>::kTiles, Cols = Rows<XRows>::kCols,
                kStages = Rows<XRows>::kStages, kWarps = Layout<Bits, Group, XRows>::kWarps;
  extern __shared__ uint4 shared_words[];
  auto& sm = *reinterpret_cast<SharedMemory<Bits, Group, XRows, kWarps>*>(shared_words);
  int64_t first;
  const Output o = block_output(launch, first);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  auto& ring = sm.ring[warp];
  auto& xc = sm.x[warp];
  float(*sums)[Cols] = sm.sums[warp];
  const int64_t n0 = (int64_t(blockIdx.x) - first) * kTileRows;
  const int64_t groups = K / Group, chunks = (groups + U - 1) / U, row_words = K * Bits / 32;
  for (int i = lane; i < U * Cols; i += 32) sums[i / Cols][i % Cols] = 0.0f;  // rows ≥ M stay 0
  // This warp's chunks are warp, warp + kWarps, ...: mine of them.
  const int64_t mine = warp < chunks ? (chunks - warp + kWarps - 1) / kWarps : 0;
  const auto chunk_of = [&](int64_t k) { return warp + k * kWarps; };
  // The first kStages - 1 chunks go out at once; each step then starts the
  // copy of the chunk kStages - 1 ahead, and stores the scales and biases
  // loaded one step before.
  float params[U];
#pragma unroll
  for (int k = 0; k < kStages - 1; ++k) {
    if (k < mine) {
      copy_chunk<Bits, Group>(ring, k, o, n0, row_words, chunk_of(k), lane);
      load_params<Bits, Group>(params, o, n0, groups, chunk_of(k), lane);
      store_params<Bits, Group>(ring, k, params, lane);
    }
    commit_copies();
  }
  float acc[Tiles][4] = {};
  for (int64_t k = 0; k < mine; ++k) {
    const int64_t ahead = k + kStages - 1;
    if (k >= 1 && ahead - 1 < mine) store_params<Bits, Group>(ring, int((ahead - 1) % kStages), params, lane);
    if (ahead < mine) {
      copy_chunk<Bits, Group>(ring, int(ahead % kStages), o, n0, row_words, chunk_of(ahead), lane);
      load_params<Bits, Group>(params, o, n0, groups, chunk_of(ahead), lane);
    }
    commit_copies();
    const int64_t g0 = chunk_of(k) * U;
    stage_x<Bits, Group, XRows, Cols>(x, M, K, g0, groups, lane, xc, sums);
    wait_copies<kStages - 1>();  // chunk k's copies, this lane's
    __syncwarp();                // and every lane's, and the sums
    const int stage = int(k % kStages);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t gi = g0 + u;
      if (gi >= groups) break;
      float part[Tiles][4] = {};
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const int w = u * S::kGroupWords + t * W + j;
        const uint32_t wa = *ring.word(stage, g, w), wb = *ring.word(stage, g + 8, w);
        // B for the word's two mmas, per tile of 8 rows of x (rows ≥ M zero).
        uint32_t b[Tiles][2][2] = {};
#pragma unroll
        for (int tile = 0; tile < Tiles; ++tile) {
          const int r = g + 8 * tile;
          if (r >= M) continue;
          if constexpr (Bits == 4) {
            const uint4 v = xc.pieces[r][w];
            b[tile][0][0] = v.x, b[tile][0][1] = v.y, b[tile][1][0] = v.z, b[tile][1][1] = v.w;
          } else {
            const uint2 v = reinterpret_cast<const uint2*>(xc.pieces[r])[w];
            b[tile][0][0] = v.x, b[tile][0][1] = times16(v.x), b[tile][1][0] = v.y, b[tile][1][1] = times16(v.y);
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t a[4] = {code_pair(wa, 8 * h), code_pair(wb, 8 * h), code_pair(wa, 8 * h + 4),
                                 code_pair(wb, 8 * h + 4)};
#pragma unroll
          for (int tile = 0; tile < Tiles; ++tile) mma_bf16(part[tile], a, b[tile][h]);
        }
      }
      // C holds rows g, g + 8 (of the weight tile) × rows 2t, 2t + 1 of x.
      const float* p = ring.params[stage];
      const float sa = p[g * U + u], sb = p[(g + 8) * U + u];
      const float ba = p[(kTileRows + g) * U + u], bb = p[(kTileRows + g + 8) * U + u];
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
#pragma unroll
  for (int tile = 0; tile < Tiles; ++tile) {
    const int col = 8 * tile + 2 * t;
    sm.partial[warp][g][col] = acc[tile][0], sm.partial[warp][g][col + 1] = acc[tile][1];
    sm.partial[warp][g + 8][col] = acc[tile][2], sm.partial[warp][g + 8][col + 1] = acc[tile][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kTileRows * Cols; i += blockDim.x) {
    const int row = i % kTileRows, col = i / kTileRows;
    const int64_t n = n0 + row;
    if (col >= M || n >= o.n) continue;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += sm.partial[w][row][col];
    o.y[col * o.n + n] = v + (o.bias ? o.bias[n] : 0.0f);
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
    affine::add_output(args, *t, kTileRows);
  }
  const dim3 grid(unsigned(args.first_block[args.count]));
  with_group(q.group_size, [&](auto gs) {
    constexpr int G = decltype(gs)::value;
    const auto go = [&]<int Bits>(std::integral_constant<int, Bits>) {
      const auto run = [&]<int XRows>(std::integral_constant<int, XRows>) {
        using L = Layout<Bits, G, XRows>;
        const auto kernel = affine_mma_gemv_kernel<Bits, G, XRows>;
        const dim3 block(32 * L::kWarps);
        constexpr size_t bytes = L::kSharedBytes;
        // Past 48 KiB a kernel must ask for its shared memory, once on each
        // device (a bit each).
        static std::atomic<uint64_t> asked_on{0};
        const uint64_t device_bit = uint64_t(1) << (ctx_->device % 64);
        if (!(asked_on.load(std::memory_order_relaxed) & device_bit)) {
          check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
                     "matmul: quantized gemv (tensor cores)");
          asked_on.fetch_or(device_bit, std::memory_order_relaxed);
        }
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
