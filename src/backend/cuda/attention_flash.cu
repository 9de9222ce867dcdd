// Prefill's attention on tensor cores: causal attention of many query rows
// over plain bf16 KV rows in bf16 compute, as FlashAttention-2 computes it
// (queries and probabilities rounded to bf16, products summed in f32, the
// softmax online over tiles of keys), with mma.sync's bf16 m16n8k16.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "backend/cuda/async_copy.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kv_layout.h"

namespace fathom::cuda {
namespace {

// A block: kFlashWarps warps of 16 query rows each (a query row is a (token,
// query head) pair of one kv head's group), over tiles of kFlashKeys keys.
constexpr int kFlashWarps = 4, kFlashRows = 16 * kFlashWarps, kFlashKeys = 64;

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // lo in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
}

// c[16×8] += a[16×16] · b[16×8], fragments in PTX's m16n8k16 layout: lane
// (quad = lane / 4, pair = lane % 4) holds c at rows quad and quad + 8,
// columns 2·pair and 2·pair + 1.
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8×8 bf16 matrices from shared memory, lanes 8i..8i+7 naming matrix
// i's rows; transposed on the way when `Trans`.
template <bool Trans>
__device__ __forceinline__ void load_matrices(uint32_t r[4], const void* row) {
  const unsigned addr = unsigned(__cvta_generic_to_shared(row));
  if constexpr (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
}

// A block's shared memory: two stages of key and value tiles, so that the
// next tile's rows are on their way while this one is multiplied (the
// copies' latency, not the tensor cores, set the pace with one stage), and
// each stage's row addresses (null past the block's keys).
template <int D>
struct FlashTiles {
  static constexpr int kStride = D + 8;  // a shared row's bf16s: ldmatrix's 8 rows land in distinct banks
  __nv_bfloat16 ks[2][kFlashKeys][kStride];
  __nv_bfloat16 vs[2][kFlashKeys][kStride];
  const unsigned char* key_rows[2][kFlashKeys];
  const unsigned char* value_rows[2][kFlashKeys];
};

// Writes a split's partial in attention_split_kernel's layout (m, l, then
// the unnormalized output; m = −inf when the split saw no key), or the
// output itself when the keys are not split.
template <int D>
__global__ void __launch_bounds__(32 * kFlashWarps)
attention_flash_bf16_kernel(KvLayout l, unsigned char* const* table, const float* q, int64_t t, int64_t heads,
                            int64_t kv_heads, float scale, int64_t q_first, int64_t window, int64_t splits,
                            int64_t split_len, float* partial, float* out) {
  await_previous_kernel();
  constexpr int kChunks = D / 8;  // 16-byte pieces of a row
  extern __shared__ __align__(16) unsigned char flash_shared[];
  FlashTiles<D>& sm = *reinterpret_cast<FlashTiles<D>*>(flash_shared);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, quad = lane / 4, pair = lane % 4;
  const int64_t group = heads / kv_heads, nq = t * group, g = blockIdx.y, split = blockIdx.z;
  const int64_t block_q0 = int64_t(blockIdx.x) * kFlashRows;

  // This lane's two query rows (its fragments' rows quad and quad + 8): the
  // row of q and out, and the view rows it sees.
  int64_t q_row[2], first_key[2], last_key[2];
  bool live[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t qi = block_q0 + warp * 16 + quad + 8 * i;
    live[i] = qi < nq;
    const int64_t token = live[i] ? qi / group : 0, pos = q_first + token;
    q_row[i] = token * heads + g * group + qi % group;
    last_key[i] = pos - l.first_position;
    first_key[i] = window > 0 ? max(pos - window + 1 - l.first_position, int64_t(0)) : 0;
  }
  // Queries as A fragments, scaled, then rounded to bf16.
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc)
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int col = kc * 16 + half * 8 + 2 * pair;
        const float2 v = live[i] ? *reinterpret_cast<const float2*>(q + q_row[i] * D + col) : float2{0.0f, 0.0f};
        qa[kc][i + 2 * half] = pack_bf16x2(v.x * scale, v.y * scale);
      }

  const int64_t q_last = min(block_q0 + kFlashRows, nq) - 1;
  const int64_t block_lo = window > 0 ? max(q_first + block_q0 / group - window + 1 - l.first_position, int64_t(0)) : 0;
  const int64_t lo = max(block_lo, split * split_len);
  const int64_t hi = min(q_first + q_last / group - l.first_position, (split + 1) * split_len - 1);
  const int64_t block_first_last = q_first + block_q0 / group - l.first_position;
  float m[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  float o[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[dn][c] = 0.0f;

  // Tile k0's row addresses (threads below kFlashKeys, one row each), then
  // its copies (every thread, after a barrier has made the addresses seen).
  const auto find_rows = [&](int stage, int64_t k0) {
    if (threadIdx.x < kFlashKeys) {
      const int64_t key = k0 + threadIdx.x;
      const bool in = key <= hi;
      const RowRef ref = in ? row_ref(l, table, key) : RowRef{nullptr, 0};
      sm.key_rows[stage][threadIdx.x] = in ? row_ptr(l, ref, 0, g) : nullptr;
      sm.value_rows[stage][threadIdx.x] = in ? row_ptr(l, ref, 1, g) : nullptr;
    }
  };
  // Keys past hi are zeros: their probabilities are 0, and 0 · (stale
  // bytes) could be NaN.
  const auto copy_rows = [&](int stage) {
    for (int e = threadIdx.x; e < kFlashKeys * kChunks; e += blockDim.x) {
      const int r = e / kChunks, c = e % kChunks;
      const unsigned char* kr = sm.key_rows[stage][r];
      const unsigned char* vr = sm.value_rows[stage][r];
      copy_async16(&sm.ks[stage][r][c * 8], kr ? kr + 16 * c : static_cast<const void*>(q), kr ? 16 : 0);
      copy_async16(&sm.vs[stage][r][c * 8], vr ? vr + 16 * c : static_cast<const void*>(q), vr ? 16 : 0);
    }
    commit_copies();
  };
  if (lo <= hi) {
    find_rows(0, lo);
    __syncthreads();
    copy_rows(0);
  }
  int stage = 0;
  for (int64_t k0 = lo; k0 <= hi; k0 += kFlashKeys, stage ^= 1) {
    const bool more = k0 + kFlashKeys <= hi;
    // The other stage was last read in the previous tile, which every warp
    // finished before the barrier below; its addresses are written first.
    if (more) find_rows(stage ^ 1, k0 + kFlashKeys);
    __syncthreads();
    if (more) {
      copy_rows(stage ^ 1);
      wait_copies<1>();  // this tile's copies (this thread's); the next tile's stay in flight
    } else {
      wait_copies<0>();
    }
    __syncthreads();  // and every thread's
    const auto& ks = sm.ks[stage];
    const auto& vs = sm.vs[stage];

    // Scores: 8-key column tiles j, two per ldmatrix (keys j·8.., then + 8;
    // head dims kc·16.., then + 8).
    float s[kFlashKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kFlashKeys / 8; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) s[j][c] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc)
#pragma unroll
      for (int j = 0; j < kFlashKeys / 8; j += 2) {
        uint32_t b[4];
        load_matrices<false>(b, &ks[j * 8 + (lane & 7) + ((lane >> 4) << 3)][kc * 16 + ((lane >> 3) & 1) * 8]);
        mma_bf16(s[j], qa[kc], b[0], b[1]);
        mma_bf16(s[j + 1], qa[kc], b[2], b[3]);
      }
    // Causal, window and span masks, where the tile needs them: below the
    // block's first row's last key (the smallest of its rows'), within the
    // split and without a window, every key is seen by every row.
    if (window > 0 || k0 + kFlashKeys - 1 > min(hi, block_first_last)) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < kFlashKeys / 8; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int64_t key = k0 + j * 8 + 2 * pair + c;
            if (key > hi || key > last_key[i] || key < first_key[i]) s[j][2 * i + c] = -INFINITY;
          }
    }
    // The online softmax per row (a row's 64 scores are spread over the 4
    // lanes of its quad). __expf (ex2 of x·log2 e; x ≤ 0 here) is within a
    // few ulp: far inside bf16's rounding of the probabilities that follows.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kFlashKeys / 8; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * i], s[j][2 * i + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[i], mx);
      const float base = m_new == -INFINITY ? 0.0f : m_new;  // no key yet: every exp is 0
      const float correction = __expf(m[i] - base);
      m[i] = m_new;
      float row_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kFlashKeys / 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float& v = s[j][2 * i + c];
          v = __expf(v - base);
          row_sum += v;
        }
      sum[i] = sum[i] * correction + row_sum;  // this lane's share; the quad's are added at the end
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) o[dn][2 * i] *= correction, o[dn][2 * i + 1] *= correction;
    }
    // Output += P · V: the score fragments of 16 keys are an A fragment;
    // V's B fragments come transposed from its row-major tile.
#pragma unroll
    for (int kk = 0; kk < kFlashKeys / 16; ++kk) {
      const uint32_t pa[4] = {pack_bf16x2(s[2 * kk][0], s[2 * kk][1]), pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dn = 0; dn < D / 8; dn += 2) {
        uint32_t b[4];
        load_matrices<true>(b, &vs[kk * 16 + (lane & 15)][dn * 8 + (lane >> 4) * 8]);
        mma_bf16(o[dn], pa, b[0], b[1]);
        mma_bf16(o[dn + 1], pa, b[2], b[3]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
    sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
    if (!live[i]) continue;
    if (splits == 1) {
      const float inv = sum[i] > 0.0f ? 1.0f / sum[i] : 0.0f;
      float* dst = out + q_row[i] * D;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn)
        *reinterpret_cast<float2*>(dst + dn * 8 + 2 * pair) = float2{o[dn][2 * i] * inv, o[dn][2 * i + 1] * inv};
    } else {
      float* dst = partial + (q_row[i] * splits + split) * (D + 2);
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn)
        *reinterpret_cast<float2*>(dst + 2 + dn * 8 + 2 * pair) = float2{o[dn][2 * i], o[dn][2 * i + 1]};
      if (pair == 0) dst[0] = m[i], dst[1] = sum[i];
    }
  }
}

}  // namespace

bool CudaBackend::flash_attention_suits(const KvView& kv, const AttentionParams& p, int64_t t) {
  return p.bf16_inputs && t > 1 && kv.format.codec == KvFormat::Codec::plain && kv.format.dtype == DType::bf16 &&
         (kv.head_dim() == 64 || kv.head_dim() == 128);
}

int64_t CudaBackend::flash_attention_splits(const KvView& kv, int64_t t, int64_t heads) const {
  const int64_t blocks = (t * (heads / kv.kv_heads()) + kFlashRows - 1) / kFlashRows * kv.kv_heads();
  return key_splits(blocks, kv.length, kFlashKeys, t * heads);
}

void CudaBackend::flash_attention(const KvLayout& l, unsigned char* const* table, const float* q, int64_t t,
                                  int64_t heads, const KvView& kv, const AttentionParams& p, int64_t splits,
                                  float* partial, float* out) {
  const int64_t d = kv.head_dim(), group = heads / kv.kv_heads();
  const int64_t split_len = ((kv.length + splits - 1) / splits + kFlashKeys - 1) / kFlashKeys * kFlashKeys;
  const dim3 grid(unsigned((t * group + kFlashRows - 1) / kFlashRows), unsigned(kv.kv_heads()), unsigned(splits));
  auto kernel = d == 64 ? attention_flash_bf16_kernel<64> : attention_flash_bf16_kernel<128>;
  const size_t bytes = d == 64 ? sizeof(FlashTiles<64>) : sizeof(FlashTiles<128>);
  // Past 48 KiB a kernel must ask for its shared memory, once on each device.
  static std::atomic<uint32_t> asked[64];
  const uint32_t bit = d == 64 ? 1u : 2u;
  if ((asked[ctx_->device % 64].load(std::memory_order_relaxed) & bit) == 0) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
               "attention: tensor cores");
    asked[ctx_->device % 64].fetch_or(bit, std::memory_order_relaxed);
  }
  launch("attention: tensor cores", kernel, grid, 32 * kFlashWarps, bytes, l, table, q, t, heads, kv.kv_heads(),
         p.scale, p.first_position, p.window.value_or(0), splits, split_len, partial, out);
}

}  // namespace fathom::cuda
