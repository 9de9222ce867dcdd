// The CUDA backend's KV ops: rows encoded into paged blocks (plain, affine,
// TurboQuant codebook), read back, and causal attention over them read in
// place. The block table is a host array of device pointers; each op stages it.
#include <algorithm>
#include <cmath>

#include "backend/cuda/bf16_vectors.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/head_rows.h"
#include "backend/cuda/kv_layout.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {

constexpr int kMaxHeadDim = 512;

__device__ __forceinline__ uint32_t code_at(const uint32_t* words, int bits, int64_t i) {
  const int64_t bit = i * bits;
  const int64_t w = bit >> 5, shift = bit & 31;
  uint64_t pair = words[w];
  if (shift + bits > 32) pair |= uint64_t(words[w + 1]) << 32;
  return uint32_t(pair >> shift) & ((1u << bits) - 1u);
}

// Element i of row j, head h, K (v = 0) or V (v = 1), widened; codebook rows
// stay in the rotated space.
__device__ float kv_element(const KvLayout& l, RowRef ref, int v, int64_t h, int64_t i) {
  const unsigned char* row = row_ptr(l, ref, v, h);
  if (l.codec == 0)
    return l.bf16 ? __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(row)[i]) : reinterpret_cast<const float*>(row)[i];
  const uint32_t code = code_at(reinterpret_cast<const uint32_t*>(row), l.bits[v], i);
  const int64_t params = (h * l.block_rows + ref.r) * l.param_bytes;
  if (l.codec == 1) {
    const int64_t g = i / l.group;
    const float s = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(ref.block + l.scales_base[v] + params)[g]);
    const float b = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(ref.block + l.biases_base[v] + params)[g]);
    return s * float(code) + b;
  }
  const float scale = *reinterpret_cast<const float*>(ref.block + l.scales_base[v] + params);
  return scale * l.table[v][code];
}

// x (n values, a power of two) ← H·(signs ⊙ x)/√n, or its inverse; one thread, local memory.
__device__ void rotate(float* x, int64_t n, const float* signs, bool inverse) {
  if (!inverse)
    for (int64_t i = 0; i < n; ++i) x[i] *= signs[i];
  for (int64_t len = 1; len < n; len <<= 1)
    for (int64_t i = 0; i < n; i += len << 1)
      for (int64_t j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
  const float inv = rsqrtf(float(n));
  for (int64_t i = 0; i < n; ++i) x[i] *= inverse ? inv * signs[i] : inv;
}

__global__ void rotate_rows_kernel(float* x, int64_t rows, int64_t d, const float* signs, bool inverse) {
  await_previous_kernel();
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  float buf[kMaxHeadDim];
  float* p = x + row * d;
  for (int64_t i = 0; i < d; ++i) buf[i] = p[i];
  rotate(buf, d, signs, inverse);
  for (int64_t i = 0; i < d; ++i) p[i] = buf[i];
}

__device__ void pack(uint32_t* words, int bits, int64_t i, uint32_t code) {
  const int64_t bit = i * bits;
  const int64_t w = bit >> 5, shift = bit & 31;
  words[w] |= code << shift;
  if (shift + bits > 32) words[w + 1] |= code >> (32 - shift);
}

// Plain rows (bf16 or f32) of every sequence of a step: a thread per four
// values of a (token, head, K or V) row, a 16-byte load and one store each
// (head_dim a multiple of 4; rows in blocks are 16-byte aligned, as the
// attention kernels read them). Token t goes to its sequence's view at its
// position (refs[t]).
__global__ void kv_write_plain_kernel(KvLayout l, const KvRowRef* refs, int64_t count, int64_t heads,
                                      const float* k, const float* v) {
  await_previous_kernel();
  const int64_t quads = l.head_dim / 4;
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= count * heads * 2 * quads) return;
  const int64_t c = idx % quads, rest = idx / quads, h = (rest / 2) % heads, t = rest / 2 / heads;
  const int which = int(rest % 2);
  const float4 x = reinterpret_cast<const float4*>((which ? v : k) + (t * heads + h) * l.head_dim)[c];
  const KvRowRef s = refs[t];
  unsigned char* dst = row_ptr(l, row_ref(l, s, s.position - s.first_position), which, h);
  if (!l.bf16) {
    reinterpret_cast<float4*>(dst)[c] = x;
    return;
  }
  const __nv_bfloat162 lo = __floats2bfloat162_rn(x.x, x.y), hi = __floats2bfloat162_rn(x.z, x.w);
  reinterpret_cast<uint2*>(dst)[c] =
      make_uint2(reinterpret_cast<const uint32_t&>(lo), reinterpret_cast<const uint32_t&>(hi));
}

// rope_kv_write over plain rows: a block per head vector of q (turned in
// place), of k (turned in place, then written to its row of the view) and
// of v (written), in that order; the norms where given. The arithmetic of
// rms_norm_rope_rows / rope_rows (cuda_ops.cu) and kv_write_plain_kernel.
__global__ void rope_kv_write_plain_kernel(HeadRows x, const float* v, KvLayout l, const KvRowRef* refs, float eps,
                                           const float* cos, const float* sin, int64_t half) {
  await_previous_kernel();
  extern __shared__ float normed[];
  const int64_t d = l.head_dim, turned = x.rows(), first_k = x.t * x.q_heads;
  float* row;
  int64_t r;  // row of k or v
  int which;
  if (blockIdx.x < turned) {
    const float* w;
    int64_t ti;
    row = x.at(blockIdx.x, d, w, ti);
    norm_rope_head(row, w, eps, cos, sin, ti, d, half, normed);
    if (blockIdx.x < first_k) return;
    r = blockIdx.x - first_k, which = 0;
  } else {
    r = blockIdx.x - turned, which = 1;
    row = const_cast<float*>(v) + r * d;
  }
  // Each thread stores the values it turned (norm_rope_head's order of i).
  const KvRowRef s = refs[r / x.k_heads];
  unsigned char* dst = row_ptr(l, row_ref(l, s, s.position - s.first_position), which, r % x.k_heads);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    if (l.bf16) reinterpret_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(row[i]);
    else reinterpret_cast<float*>(dst)[i] = row[i];
  }
}

// Kernels that spread a row over lanes give each of a row's D / 8 lanes 8
// consecutive values (D ≤ 256, a power of two: the rows of a warp never
// straddle it). Whether a view's rows can be taken that way:
__host__ __device__ constexpr bool lanes_take_rows(int64_t d) { return d >= 8 && d <= 256 && (d & (d - 1)) == 0; }
// Coded rows so taken: an affine group is a whole number of a row's lanes.
bool lanes_take_codes(const KvFormat& f) {
  return lanes_take_rows(f.head_dim) &&
         (f.codec != KvFormat::Codec::affine || (f.group_size % 8 == 0 && f.head_dim % f.group_size == 0));
}

// 8 consecutive f32 values (p 16-byte aligned) in two 16-byte loads.
__device__ __forceinline__ void load_f32x8(const float* p, float out[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

// rotate() on a row spread over lanes (`part` of d / 8, values 8·part ..
// 8·part + 7 in x): the same butterflies in the same order, so the same
// values to the bit; the stages 8 values apart and more trade across lanes.
__device__ __forceinline__ void rotate_slice(float x[8], int part, int64_t d, const float* signs, bool inverse) {
  if (!inverse)
#pragma unroll
    for (int c = 0; c < 8; ++c) x[c] *= signs[8 * part + c];
#pragma unroll
  for (int len = 1; len < 8; len <<= 1)
#pragma unroll
    for (int i = 0; i < 8; i += 2 * len)
#pragma unroll
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
  for (int64_t len = 8; len < d; len <<= 1) {
    const int o = int(len / 8);
    const bool upper = (part & o) != 0;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const float other = __shfl_xor_sync(0xffffffffu, x[c], o);
      x[c] = upper ? other - x[c] : x[c] + other;
    }
  }
  const float inv = rsqrtf(float(d));
#pragma unroll
  for (int c = 0; c < 8; ++c) x[c] *= inverse ? inv * signs[8 * part + c] : inv;
}

// Rows of x rotated in place (attention's queries into the codebook's
// rotated space, its output back), d / 8 lanes a row.
__global__ void rotate_rows_lanes_kernel(float* x, int64_t rows, int64_t d, const float* signs, bool inverse) {
  await_previous_kernel();
  const int lanes = int(d / 8);
  const int64_t tid = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, row = tid / lanes;
  const int part = int(tid % lanes);
  float* p = x + min(row, rows - 1) * d + 8 * part;  // rows past the end shuffle along, store nothing
  float v[8];
  load_f32x8(p, v);
  rotate_slice(v, part, d, signs, inverse);
  if (row >= rows) return;
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// `bits` bytes of codes: values 8·part .. 8·part + 7 of a row, packed from
// the lowest bit up (a row starts 8-byte aligned: D · bits / 8 is a multiple of 8).
__device__ __forceinline__ unsigned long long load_codes(const unsigned char* p, int bits) {
  switch (bits) {
    case 8: return *reinterpret_cast<const unsigned long long*>(p);
    case 4: return *reinterpret_cast<const uint32_t*>(p);
    case 2: return *reinterpret_cast<const uint16_t*>(p);
    case 6: {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      return h[0] | uint64_t(h[1]) << 16 | uint64_t(h[2]) << 32;
    }
    default: return p[0] | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16;  // 3 bits
  }
}

// `bits` bytes of codes stored where load_codes reads them.
__device__ __forceinline__ void store_codes(unsigned char* p, int bits, unsigned long long codes) {
  switch (bits) {
    case 8: *reinterpret_cast<unsigned long long*>(p) = codes; return;
    case 4: *reinterpret_cast<uint32_t*>(p) = uint32_t(codes); return;
    case 2: *reinterpret_cast<uint16_t*>(p) = uint16_t(codes); return;
    case 6: {
      auto* h = reinterpret_cast<uint16_t*>(p);
      h[0] = uint16_t(codes), h[1] = uint16_t(codes >> 16), h[2] = uint16_t(codes >> 32);
      return;
    }
    default: p[0] = uint8_t(codes), p[1] = uint8_t(codes >> 8), p[2] = uint8_t(codes >> 16);  // 3 bits
  }
}

// Coded rows (affine or codebook) of every sequence of a step, d / 8 lanes
// per (token, head, K or V) row, each encoding its 8 values into its `bits`
// bytes of the row: the choices of the CPU codecs (kv_write_kernel's), with
// a group's range and a row's norm gathered across its lanes. Token t goes to
// its sequence's view at its position (refs[t]).
__global__ void kv_write_coded_kernel(KvLayout l, const KvRowRef* refs, int64_t count, int64_t heads, const float* k,
                                      const float* v, const float* signs) {
  await_previous_kernel();
  const int64_t d = l.head_dim, units = count * heads * 2;
  const int lanes = int(d / 8);
  const int64_t tid = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, unit = min(tid / lanes, units - 1);
  const bool live = tid / lanes < units;  // rows past the end shuffle along, store nothing
  const int part = int(tid % lanes), which = int(unit % 2);
  const int64_t h = (unit / 2) % heads, t = unit / 2 / heads;
  const float* x = (which ? v : k) + (t * heads + h) * d + 8 * part;
  float val[8];
  load_f32x8(x, val);
  const KvRowRef s = refs[t];
  const RowRef ref = row_ref(l, s, s.position - s.first_position);
  const int bits = l.bits[which];
  const int64_t param_row = (h * l.block_rows + ref.r) * l.param_bytes;
  unsigned char* params = ref.block + l.scales_base[which] + param_row;
  unsigned long long codes = 0;
  if (l.codec == 1) {
    const int group_lanes = l.group / 8;
    float lo = val[0], hi = val[0];
#pragma unroll
    for (int c = 1; c < 8; ++c) lo = fminf(lo, val[c]), hi = fmaxf(hi, val[c]);
    for (int o = 1; o < group_lanes; o <<= 1) {
      lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
      hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    }
    const float levels = float((1u << bits) - 1u);
    const __nv_bfloat16 scale = __float2bfloat16_rn((hi - lo) / levels), bias = __float2bfloat16_rn(lo);
    if (live && part % group_lanes == 0) {
      const int64_t g = part / group_lanes;
      reinterpret_cast<__nv_bfloat16*>(params)[g] = scale;
      reinterpret_cast<__nv_bfloat16*>(ref.block + l.biases_base[which] + param_row)[g] = bias;
    }
    // Codes against the stored (bf16) parameters, as the CPU codec chooses them.
    const float sc = __bfloat162float(scale), bs = __bfloat162float(bias);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const float q = sc > 0.0f ? nearbyintf((val[c] - bs) / sc) : 0.0f;
      codes |= uint64_t(uint32_t(fminf(fmaxf(q, 0.0f), levels))) << (c * bits);
    }
  } else {
    rotate_slice(val, part, d, signs, false);
    double ss = 0.0;
#pragma unroll
    for (int c = 0; c < 8; ++c) ss += double(val[c]) * val[c];
    for (int o = 1; o < lanes; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float norm = float(sqrt(ss));
    if (live && part == 0) *reinterpret_cast<float*>(params) = norm;
    const float to_unit = norm > 0.0f ? sqrtf(float(d)) / norm : 0.0f;
    const int n_bounds = (1 << bits) - 1;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const float u = val[c] * to_unit;
      uint32_t code = 0;
      while (int(code) < n_bounds && !(u < l.boundaries[which][code])) ++code;  // upper_bound
      codes |= uint64_t(code) << (c * bits);
    }
  }
  if (live) store_codes(row_ptr(l, ref, which, h) + bits * part, bits, codes);
}

// One thread per (token, head, K or V): encodes one row, as the CPU codecs do.
__global__ void kv_write_kernel(KvLayout l, unsigned char* const* table, int64_t row0, int64_t count, int64_t heads,
                                const float* k, const float* v, const float* signs) {
  await_previous_kernel();
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= count * heads * 2) return;
  const int which = int(idx % 2);
  const int64_t h = (idx / 2) % heads, t = idx / 2 / heads, d = l.head_dim;
  const float* x = (which ? v : k) + (t * heads + h) * d;
  const RowRef ref = row_ref(l, table, row0 + t);
  unsigned char* dst = row_ptr(l, ref, which, h);
  if (l.codec == 0) {
    for (int64_t i = 0; i < d; ++i) {
      if (l.bf16) reinterpret_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(x[i]);
      else reinterpret_cast<float*>(dst)[i] = x[i];
    }
    return;
  }
  const int bits = l.bits[which];
  auto* words = reinterpret_cast<uint32_t*>(dst);
  for (int64_t w = 0; w < l.row_bytes[which] / 4; ++w) words[w] = 0;
  const int64_t params = (h * l.block_rows + ref.r) * l.param_bytes;
  if (l.codec == 1) {
    const float levels = float((1u << bits) - 1u);
    auto* scales = reinterpret_cast<__nv_bfloat16*>(ref.block + l.scales_base[which] + params);
    auto* biases = reinterpret_cast<__nv_bfloat16*>(ref.block + l.biases_base[which] + params);
    for (int64_t g = 0; g < l.groups; ++g) {
      const float* xs = x + g * l.group;
      float lo = xs[0], hi = xs[0];
      for (int64_t i = 1; i < l.group; ++i) lo = fminf(lo, xs[i]), hi = fmaxf(hi, xs[i]);
      scales[g] = __float2bfloat16_rn((hi - lo) / levels);
      biases[g] = __float2bfloat16_rn(lo);
      // Codes against the stored (bf16) parameters, as the CPU codec chooses them.
      const float s = __bfloat162float(scales[g]), b = __bfloat162float(biases[g]);
      for (int64_t i = 0; i < l.group; ++i) {
        const float q = s > 0.0f ? nearbyintf((xs[i] - b) / s) : 0.0f;
        pack(words, bits, g * l.group + i, uint32_t(fminf(fmaxf(q, 0.0f), levels)));
      }
    }
    return;
  }
  float buf[kMaxHeadDim];
  for (int64_t i = 0; i < d; ++i) buf[i] = x[i];
  rotate(buf, d, signs, false);
  double ss = 0.0;
  for (int64_t i = 0; i < d; ++i) ss += double(buf[i]) * buf[i];
  const float norm = float(sqrt(ss));
  *reinterpret_cast<float*>(ref.block + l.scales_base[which] + params) = norm;
  const float to_unit = norm > 0.0f ? sqrtf(float(d)) / norm : 0.0f;
  const int n_bounds = (1 << bits) - 1;
  for (int64_t i = 0; i < d; ++i) {
    const float u = buf[i] * to_unit;
    uint32_t c = 0;
    while (int(c) < n_bounds && !(u < l.boundaries[which][c])) ++c;  // upper_bound
    pack(words, bits, i, c);
  }
}

// One thread per (token, head, K or V): a row widened (and rotated back).
__global__ void kv_read_kernel(KvLayout l, unsigned char* const* table, int64_t row0, int64_t count, int64_t heads,
                               float* k, float* v, const float* signs) {
  await_previous_kernel();
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= count * heads * 2) return;
  const int which = int(idx % 2);
  const int64_t h = (idx / 2) % heads, t = idx / 2 / heads, d = l.head_dim;
  float* out = (which ? v : k) + (t * heads + h) * d;
  const RowRef ref = row_ref(l, table, row0 + t);
  for (int64_t i = 0; i < d; ++i) out[i] = kv_element(l, ref, which, h, i);
  if (l.codec == 2) {
    float buf[kMaxHeadDim];
    for (int64_t i = 0; i < d; ++i) buf[i] = out[i];
    rotate(buf, d, signs, true);
    for (int64_t i = 0; i < d; ++i) out[i] = buf[i];
  }
}

// Split-KV attention: warp (query row, head, split) runs an online softmax
// over its split of the keys the row sees (split_len keys from split ·
// split_len) and writes the partial maximum, sum and weighted values; a
// second kernel combines the splits. Each lane holds d / 32 of the values.
__global__ void attention_split_kernel(KvLayout l, unsigned char* const* table, const float* q, int64_t t,
                                       int64_t heads, int64_t kv_heads, float scale, int64_t q_first, int64_t window,
                                       int64_t splits, int64_t split_len, float* partial) {
  await_previous_kernel();
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= t * heads) return;
  const int64_t split = blockIdx.y;
  const int64_t ti = warp / heads, h = warp % heads, g = h / (heads / kv_heads), d = l.head_dim;
  constexpr int kPer = kMaxHeadDim / 32;
  float qr[kPer], acc[kPer];
  const float* qrow = q + warp * d;
  for (int c = 0; c < kPer; ++c) {
    const int64_t i = lane + 32 * c;
    qr[c] = i < d ? qrow[i] * scale : 0.0f;
    acc[c] = 0.0f;
  }
  const int64_t pos = q_first + ti;
  const int64_t lo_pos = window > 0 ? max(l.first_position, pos - window + 1) : l.first_position;
  const int64_t lo = max(lo_pos - l.first_position, split * split_len);
  const int64_t hi = min(pos - l.first_position, (split + 1) * split_len - 1);
  float m = -INFINITY, sum = 0.0f;
  for (int64_t j = lo; j <= hi; ++j) {
    const RowRef ref = row_ref(l, table, j);
    float s = 0.0f;
    for (int c = 0; c < kPer && lane + 32 * c < d; ++c) s += qr[c] * kv_element(l, ref, 0, g, lane + 32 * c);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new), p = expf(s - m_new);
    sum = sum * correction + p;
    for (int c = 0; c < kPer && lane + 32 * c < d; ++c)
      acc[c] = acc[c] * correction + p * kv_element(l, ref, 1, g, lane + 32 * c);
    m = m_new;
  }
  float* out = partial + (warp * splits + split) * (d + 2);
  for (int c = 0; c < kPer && lane + 32 * c < d; ++c) out[2 + lane + 32 * c] = acc[c];
  if (lane == 0) {
    out[0] = m;  // −inf: this split saw no key
    out[1] = sum;
  }
}

// The same partials from tiles: a block takes up to kTileQueries queries of one
// kv group (query rows × the group's heads) and walks its split of the keys
// kTileKeys at a time, each key tile widened once into shared memory for all
// its queries (the warp kernel widens every key once per query head and
// reads it from memory once per query row).
constexpr int kTileQueries = 16, kTileKeys = 32, kTiledMaxHeadDim = 128, kTiledThreads = 128;

__global__ void __launch_bounds__(kTiledThreads)
attention_tiled_kernel(KvLayout l, unsigned char* const* table, const float* q, int64_t t, int64_t heads,
                       int64_t kv_heads, float scale, int64_t q_first, int64_t window, int64_t splits,
                       int64_t split_len, float* partial) {
  await_previous_kernel();
  __shared__ float qs[kTileQueries][kTiledMaxHeadDim];
  __shared__ float ks[kTileKeys][kTiledMaxHeadDim + 1];
  __shared__ float vs[kTileKeys][kTiledMaxHeadDim];
  __shared__ float sc[kTileQueries][kTileKeys];
  __shared__ float m_s[kTileQueries], l_s[kTileQueries], corr_s[kTileQueries];
  const int tid = threadIdx.x;
  const int64_t group = heads / kv_heads, rows_per_tile = kTileQueries / group, d = l.head_dim;
  const int64_t t0 = blockIdx.x * rows_per_tile, t1 = min(t, t0 + rows_per_tile);
  const int64_t g = blockIdx.y, split = blockIdx.z;
  const int nq = int((t1 - t0) * group);
  // Query qi is row t0 + qi / group, head g · group + qi % group.
  for (int64_t e = tid; e < int64_t(nq) * d; e += kTiledThreads) {
    const int64_t qi = e / d, i = e % d;
    qs[qi][i] = q[((t0 + qi / group) * heads + g * group + qi % group) * d + i] * scale;
  }
  if (tid < kTileQueries) m_s[tid] = -INFINITY, l_s[tid] = 0.0f;
  // Each thread owns the accumulators e = tid + kTiledThreads · k of [nq, d].
  constexpr int kOwned = kTileQueries * kTiledMaxHeadDim / kTiledThreads;
  float acc[kOwned];
  for (int k = 0; k < kOwned; ++k) acc[k] = 0.0f;
  // Keys any row of the tile sees, within this split.
  const int64_t last_pos = q_first + t1 - 1, first_pos = q_first + t0;
  const int64_t lo_pos = window > 0 ? max(l.first_position, first_pos - window + 1) : l.first_position;
  const int64_t lo = max(lo_pos - l.first_position, split * split_len);
  const int64_t hi = min(last_pos - l.first_position, (split + 1) * split_len - 1);
  __syncthreads();
  for (int64_t k0 = lo; k0 <= hi; k0 += kTileKeys) {
    const int64_t n = min(int64_t(kTileKeys), hi - k0 + 1);
    // A warp per key row: the row's block is looked up once, lanes walk its values.
    for (int64_t j = tid / 32; j < n; j += kTiledThreads / 32) {
      const RowRef ref = row_ref(l, table, k0 + j);
      for (int64_t i = tid % 32; i < d; i += 32) {
        ks[j][i] = kv_element(l, ref, 0, g, i);
        vs[j][i] = kv_element(l, ref, 1, g, i);
      }
    }
    __syncthreads();
    for (int e = tid; e < nq * kTileKeys; e += kTiledThreads) {
      const int qi = e / kTileKeys, j = e % kTileKeys;
      const int64_t pos = q_first + t0 + qi / group, key = l.first_position + k0 + j;
      const bool visible = j < n && key <= pos && (window <= 0 || key > pos - window);
      float s = -INFINITY;
      if (visible) {
        s = 0.0f;
        for (int64_t i = 0; i < d; ++i) s += qs[qi][i] * ks[j][i];
      }
      sc[qi][j] = s;
    }
    __syncthreads();
    if (tid < nq) {
      float mx = m_s[tid];
      for (int j = 0; j < kTileKeys; ++j) mx = fmaxf(mx, sc[tid][j]);
      float corr = 1.0f, sum = 0.0f;
      if (mx > -INFINITY) {
        corr = expf(m_s[tid] - mx);  // 0 while nothing was seen yet
        for (int j = 0; j < kTileKeys; ++j) sum += sc[tid][j] = expf(sc[tid][j] - mx);
        m_s[tid] = mx;
      } else {
        for (int j = 0; j < kTileKeys; ++j) sc[tid][j] = 0.0f;
      }
      l_s[tid] = l_s[tid] * corr + sum;
      corr_s[tid] = corr;
    }
    __syncthreads();
    for (int k = 0; k < kOwned; ++k) {
      const int64_t e = tid + int64_t(kTiledThreads) * k;
      if (e >= int64_t(nq) * d) break;
      const int64_t qi = e / d, i = e % d;
      float a = acc[k] * corr_s[qi];
      for (int64_t j = 0; j < n; ++j) a += sc[qi][j] * vs[j][i];
      acc[k] = a;
    }
    __syncthreads();
  }
  for (int k = 0; k < kOwned; ++k) {
    const int64_t e = tid + int64_t(kTiledThreads) * k;
    if (e >= int64_t(nq) * d) break;
    const int64_t qi = e / d, i = e % d;
    const int64_t row = (t0 + qi / group) * heads + g * group + qi % group;
    partial[(row * splits + split) * (d + 2) + 2 + i] = acc[k];
  }
  if (tid < nq) {
    const int64_t row = (t0 + tid / group) * heads + g * group + tid % group;
    partial[(row * splits + split) * (d + 2)] = m_s[tid];  // −inf: this split saw no key
    partial[(row * splits + split) * (d + 2) + 1] = l_s[tid];
  }
}

// Decode rows over plain bf16 or coded rows, every sequence of a step in one
// launch (query row r attends over its sequence's rows, refs[r]). A block per
// (query row, kv head, up to G of that head's query heads, split); each of
// its warps takes kKeys keys a pass. A key or value row is read by D / 8
// lanes, each taking 8 consecutive values (16 bytes of bf16, or `bits` bytes
// of codes with the row's parameters), so that one load of the warp takes
// whole rows, coalesced; every key load of a pass is issued before any is
// used, and every value load likewise. Each lane holds its 8 dims of the
// queries in registers; a key's partial dot products meet through a
// reduce-scatter across its row's lanes. The warps' partials meet in shared
// memory and leave as one split's partial, in attention_split_kernel's
// layout. (It replaced a kernel that gave each lane a whole key row, read the
// queries from shared memory and loaded value rows under a branch per row:
// on the H200, one 8B-shape layer 29.5 → 7.2 µs at 512 keys, 57.8 → 14.6 µs
// at 8,192; coded rows went through the per-view fallback, 2.4-3.4× slower
// than bf16 rows at 8,192.)
//
// Narrow: plain rows of 128 dims take 8 loads a lane and pass instead of 16
// where the 16 would leave the launch less than a warp a scheduler (one
// sequence up to ~2k keys: 8 kv heads × 4 splits = 128 warps at 512 keys on
// 132 SMs). Such a warp runs its pass alone, each instruction waiting on the
// one before; half the keys a pass gives twice the splits and each warp half
// the chain. (4 loads: four times the splits, a longer combine after, and
// the next GEMV placed later; bench/RESULTS.md, thirtieth session.)
constexpr int kDecodeWarps = 4;
constexpr int64_t kDecodeMaxRows = 16;  // query rows a step may have to take it (decode and verify rows)

template <int D, bool kCoded, bool Narrow>
struct DecodeShape {
  static constexpr int kLanesPerRow = D / 8, kRowsPerLoad = 32 / kLanesPerRow;
  // Loads per lane and pass, as registers allow (a coded load carries its row's parameters too).
  static constexpr int kLoads = D == 128 && !kCoded && !Narrow ? 16 : 8;
  static constexpr int kKeys = kLoads * kRowsPerLoad;  // a warp's keys per pass
  static_assert(kLoads <= kLanesPerRow, "the reduce-scatter leaves each key in at least one lane");
};

// How the decode kernel reads one lane's 8 values of a row: `locate` finds
// the lane's slice of key row r (of kv head g) in a block, `load` reads K's
// (v = 0) or V's slice into 16 bytes of registers, `widen` turns them into
// f32 values. Plain bf16 rows: K and V rows lie alike, rows_base apart.
struct PlainBf16Rows {
  static constexpr bool kCoded = false, kCodebook = false;
  struct Slice {
    const unsigned char* at;  // the K slice
  };
  __device__ static Slice locate(const KvLayout& l, const unsigned char* block, int64_t r, int64_t g, int part) {
    return {block + (g * l.block_rows + r) * l.row_bytes[0] + 16 * part};
  }
  __device__ static uint4 load(const KvLayout& l, Slice s, int v, int) {
    return *reinterpret_cast<const uint4*>(s.at + l.rows_base[v]);
  }
  __device__ static void widen(const KvLayout&, const uint4& w, int, const float*, float out[8]) {
    widen_bf16x8(w, out);
  }
};

// Affine (kCodec 1: value = scale · code + bias, a bf16 pair per group) or
// codebook rows (2: value = row scale · table[code], in the rotated space).
// A slice's 16 bytes: the codes, then the scale and bias as they are stored.
template <int kCodec>
struct CodedRows {
  static constexpr bool kCoded = true, kCodebook = kCodec == 2;
  struct Slice {
    const unsigned char* block;
    int32_t row;  // g · block_rows + r
  };
  __device__ static Slice locate(const KvLayout& l, const unsigned char* block, int64_t r, int64_t g, int) {
    return {block, int32_t(g * l.block_rows + r)};
  }
  __device__ static uint4 load(const KvLayout& l, Slice s, int v, int part) {
    const int bits = l.bits[v];
    const unsigned long long codes = load_codes(s.block + l.rows_base[v] + s.row * l.row_bytes[v] + bits * part, bits);
    const unsigned char* params = s.block + l.scales_base[v] + s.row * l.param_bytes;
    uint4 w;
    w.x = uint32_t(codes);
    w.y = uint32_t(codes >> 32);
    if constexpr (kCodec == 1) {
      const int at = 2 * (8 * part / l.group);
      w.z = *reinterpret_cast<const uint16_t*>(params + at);
      w.w = *reinterpret_cast<const uint16_t*>(s.block + l.biases_base[v] + s.row * l.param_bytes + at);
    } else {
      w.z = *reinterpret_cast<const uint32_t*>(params);
      w.w = 0;
    }
    return w;
  }
  // tables: the codebooks of K and V, 16 entries each (shared memory).
  __device__ static void widen(const KvLayout& l, const uint4& w, int v, const float* tables, float out[8]) {
    const int bits = l.bits[v];
    const unsigned long long codes = w.x | uint64_t(w.y) << 32;
    const uint32_t mask = (1u << bits) - 1u;
    if constexpr (kCodec == 1) {
      const float scale = __uint_as_float(w.z << 16), bias = __uint_as_float(w.w << 16);
#pragma unroll
      for (int c = 0; c < 8; ++c) out[c] = scale * float(uint32_t(codes >> (c * bits)) & mask) + bias;
    } else {
      const float scale = __uint_as_float(w.z);
#pragma unroll
      for (int c = 0; c < 8; ++c) out[c] = scale * tables[16 * v + (uint32_t(codes >> (c * bits)) & mask)];
    }
  }
};

template <int D, int G, class Rows, bool Narrow>
__global__ void __launch_bounds__(32 * kDecodeWarps)
attention_decode_kernel(KvLayout l, const KvRowRef* refs, const float* q, int64_t heads, int64_t kv_heads,
                        float scale, int64_t window, int64_t splits, int64_t split_len, float* partial) {
  await_previous_kernel();
  using S = DecodeShape<D, Rows::kCoded, Narrow>;
  constexpr int kLanes = S::kLanesPerRow, kLoads = S::kLoads, kKeys = S::kKeys;
  constexpr int kCopies = kLanes / kLoads;  // lanes left holding each key's score
  __shared__ float warp_m[kDecodeWarps][G], warp_l[kDecodeWarps][G];
  __shared__ float warp_o[kDecodeWarps][G][D];
  __shared__ float tables[32];  // codebooks: K's and V's
  if constexpr (Rows::kCodebook) {
    if (threadIdx.x < 32) tables[threadIdx.x] = l.table[threadIdx.x / 16][threadIdx.x % 16];
    __syncthreads();
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int sub = lane / kLanes, part = lane % kLanes;  // which row of a load; which 8 dims of it
  const int64_t group = heads / kv_heads, chunks = (group + G - 1) / G;
  const int64_t row = blockIdx.x / (kv_heads * chunks), g = blockIdx.x / chunks % kv_heads;
  const int64_t head0 = g * group + blockIdx.x % chunks * G, split = blockIdx.y;
  const int here = int(min(int64_t(G), g * group + group - head0));  // query heads this block takes
  const KvRowRef seq = refs[row];
  float qr[G][8];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (h < here) {
      const float4* qp = reinterpret_cast<const float4*>(q + (row * heads + head0 + h) * D + 8 * part);
      const float4 a = qp[0], b = qp[1];
      const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int c = 0; c < 8; ++c) qr[h][c] = v[c] * scale;
    } else {
#pragma unroll
      for (int c = 0; c < 8; ++c) qr[h][c] = 0.0f;
    }
  }
  const int64_t pos = seq.position, first = seq.first_position;
  const int64_t lo_pos = window > 0 ? max(first, pos - window + 1) : first;
  const int64_t lo = max(lo_pos - first, split * split_len);
  const int64_t hi = min(pos - first, (split + 1) * split_len - 1);
  float m[G], sum[G], acc[G][8];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    m[h] = -INFINITY, sum[h] = 0.0f;
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[h][c] = 0.0f;
  }
  for (int64_t k0 = lo + warp * kKeys; k0 <= hi; k0 += kDecodeWarps * kKeys) {
    // Lane j finds key k0 + j's row; keys past hi reread hi's row (weight 0),
    // so that no load waits behind a branch.
    const RowRef mine = row_ref(l, seq, min(k0 + lane, hi));
    const auto block = reinterpret_cast<unsigned long long>(mine.block);
    typename Rows::Slice at[kLoads];  // load i: key i · kRowsPerLoad + sub, this lane's slice
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int key = i * S::kRowsPerLoad + sub;
      const auto* b = reinterpret_cast<const unsigned char*>(__shfl_sync(0xffffffffu, block, key));
      const long long r = __shfl_sync(0xffffffffu, static_cast<long long>(mine.r), key);
      at[i] = Rows::locate(l, b, r, g, part);
    }
    uint4 w[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) w[i] = Rows::load(l, at[i], 0, part);
    float s[G][kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      float kf[8];
      Rows::widen(l, w[i], 0, tables, kf);
#pragma unroll
      for (int h = 0; h < G; ++h) {
        float a = 0.0f;
#pragma unroll
        for (int c = 0; c < 8; ++c) a = fmaf(qr[h][c], kf[c], a);
        s[h][i] = a;
      }
    }
    // Reduce-scatter across a row's lanes: each step halves the values a
    // lane holds, trading the other half with the lane `o` away; then the
    // copies left of each key sum up. Lane `part` ends with load
    // part / kCopies's score.
#pragma unroll
    for (int st = 1; st < kLoads; st *= 2) {
      const int half = kLoads / (2 * st), o = kLanes / (2 * st);
      const bool upper = (part & o) != 0;
#pragma unroll
      for (int h = 0; h < G; ++h)
#pragma unroll
        for (int j = 0; j < half; ++j) {
          const float keep = upper ? s[h][j + half] : s[h][j], send = upper ? s[h][j] : s[h][j + half];
          s[h][j] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
    }
#pragma unroll
    for (int st = 1; st < kCopies; st *= 2)
#pragma unroll
      for (int h = 0; h < G; ++h) s[h][0] += __shfl_xor_sync(0xffffffffu, s[h][0], st);
    const bool valid = part % kCopies == 0 && k0 + part / kCopies * S::kRowsPerLoad + sub <= hi;
    // The online softmax per query head over this pass's keys.
    float p[G];
#pragma unroll
    for (int h = 0; h < G; ++h) {
      float mx = valid ? s[h][0] : -INFINITY;
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_new = fmaxf(m[h], mx), correction = expf(m[h] - m_new);
      p[h] = valid ? expf(s[h][0] - m_new) : 0.0f;
      float t = p[h];
      for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
      sum[h] = sum[h] * correction + t;
      m[h] = m_new;
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[h][c] *= correction;
    }
    // The values.
#pragma unroll
    for (int i = 0; i < kLoads; ++i) w[i] = Rows::load(l, at[i], 1, part);
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      float vf[8];
      Rows::widen(l, w[i], 1, tables, vf);
#pragma unroll
      for (int h = 0; h < G; ++h) {
        const float weight = __shfl_sync(0xffffffffu, p[h], sub * kLanes + i * kCopies);
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[h][c] = fmaf(weight, vf[c], acc[h][c]);
      }
    }
  }
  // The rows of a load hold the same dims for different keys: sum them.
#pragma unroll
  for (int st = 1; st < S::kRowsPerLoad; st *= 2)
#pragma unroll
    for (int h = 0; h < G; ++h)
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[h][c] += __shfl_xor_sync(0xffffffffu, acc[h][c], kLanes * st);
  // The warps' partials into one.
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (lane == 0) warp_m[warp][h] = m[h], warp_l[warp][h] = sum[h];
    if (sub == 0)
#pragma unroll
      for (int c = 0; c < 8; ++c) warp_o[warp][h][8 * part + c] = acc[h][c];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < here * D; e += blockDim.x) {
    const int h = e / D, i = e % D;
    float mx = -INFINITY;
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, warp_m[w][h]);
    float total = 0.0f, value = 0.0f;
    if (mx > -INFINITY)
      for (int w = 0; w < kDecodeWarps; ++w)
        if (warp_m[w][h] > -INFINITY) {
          const float f = expf(warp_m[w][h] - mx);
          total += warp_l[w][h] * f;
          value += warp_o[w][h][i] * f;
        }
    float* out = partial + ((row * heads + head0 + h) * splits + split) * (D + 2);
    out[2 + i] = value;
    if (i == 0) {
      out[0] = mx;  // −inf: this split saw no key
      out[1] = total;
    }
  }
}

// A block per (query row, head), its warps taking equal runs of the splits:
// each warp finds the splits' max and sum (lanes across splits), weighs its
// run's values (lanes across head_dim, every load of the run in flight
// together), and the warps' sums meet in shared memory.
constexpr int kCombineWarps = 8;
__global__ void __launch_bounds__(32 * kCombineWarps)
attention_combine_kernel(const float* partial, int64_t splits, int64_t d, float* out, bool release_first) {
  await_previous_kernel(release_first);
  constexpr int kPer = kMaxHeadDim / 32;
  __shared__ float warp_acc[kCombineWarps][kMaxHeadDim];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* p = partial + blockIdx.x * splits * (d + 2);
  float m = -INFINITY;
  for (int64_t s = lane; s < splits; s += 32) m = fmaxf(m, p[s * (d + 2)]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float sum = 0.0f;
  for (int64_t s = lane; s < splits; s += 32) {
    const float ms = p[s * (d + 2)];
    if (ms > -INFINITY) sum += p[s * (d + 2) + 1] * expf(ms - m);
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const int64_t per_warp = (splits + kCombineWarps - 1) / kCombineWarps;
  const int64_t first = warp * per_warp, last = min(splits, first + per_warp);
  float acc[kPer];
#pragma unroll
  for (int c = 0; c < kPer; ++c) acc[c] = 0.0f;
  for (int64_t s0 = first; s0 < last; s0 += 32) {
    // Lane j holds split s0 + j's weight (0 for a split that saw no key).
    const float ms = s0 + lane < last ? p[(s0 + lane) * (d + 2)] : -INFINITY;
    const float mine = ms > -INFINITY ? expf(ms - m) : 0.0f;
    const int n = last - s0 < 32 ? int(last - s0) : 32;
#pragma unroll 4
    for (int j = 0; j < n; ++j) {
      const float f = __shfl_sync(0xffffffffu, mine, j);
      const float* values = p + (s0 + j) * (d + 2) + 2;
#pragma unroll
      for (int c = 0; c < kPer; ++c)
        if (lane + 32 * c < d) acc[c] = fmaf(values[lane + 32 * c], f, acc[c]);
    }
  }
#pragma unroll
  for (int c = 0; c < kPer; ++c)
    if (lane + 32 * c < d) warp_acc[warp][lane + 32 * c] = acc[c];
  __syncthreads();
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w) total += warp_acc[w][i];
    out[blockIdx.x * d + i] = total / sum;
  }
}

// Few splits of many rows (a prefill chunk's): a warp per (query row,
// head), its lanes across head_dim, the splits weighed in turn; 8 rows a
// block. attention_combine_kernel's block a row would leave most of its warps
// idle and take a block per row.
constexpr int kCombineRowsPerBlock = 8, kCombineRowsMaxSplits = 8;
__global__ void __launch_bounds__(32 * kCombineRowsPerBlock)
attention_combine_rows_kernel(const float* partial, int64_t rows, int64_t splits, int64_t d, float* out) {
  await_previous_kernel();
  constexpr int kPer = kMaxHeadDim / 32;
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kCombineRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const float* p = partial + row * splits * (d + 2);
  float m = -INFINITY;
  for (int64_t s = 0; s < splits; ++s) m = fmaxf(m, p[s * (d + 2)]);
  float sum = 0.0f, acc[kPer];
#pragma unroll
  for (int c = 0; c < kPer; ++c) acc[c] = 0.0f;
  for (int64_t s = 0; s < splits; ++s) {
    const float* split = p + s * (d + 2);
    if (!(split[0] > -INFINITY)) continue;  // a split that saw no key
    const float f = expf(split[0] - m);
    sum += split[1] * f;
#pragma unroll
    for (int c = 0; c < kPer; ++c)
      if (lane + 32 * c < d) acc[c] = fmaf(split[2 + lane + 32 * c], f, acc[c]);
  }
#pragma unroll
  for (int c = 0; c < kPer; ++c)
    if (lane + 32 * c < d) out[row * d + lane + 32 * c] = acc[c] / sum;
}

int64_t blocks_in_view(const KvView& kv, int64_t rows) {
  return kv.format.block_rows > 0 ? (kv.row_offset + rows + kv.format.block_rows - 1) / kv.format.block_rows : 0;
}

}  // namespace

const float* CudaBackend::rotation_signs(const KvView& kv) {
  Tensor& t = signs_[{kv.rotation_seed, kv.head_dim()}];
  if (!t.defined() || t.numel() == 0) {
    const HadamardRotation rotation(kv.head_dim(), kv.rotation_seed);
    Tensor host = Tensor::empty({kv.head_dim()}, DType::f32);
    std::copy(rotation.signs().begin(), rotation.signs().end(), host.data<float>());
    // Kept across steps: not a step's tensor, even while one is recorded.
    t = allocate(host.shape(), DType::f32);
    copy_to_device(t.raw(), host.raw(), host.nbytes());
  }
  return t.data<float>();
}

void CudaBackend::kv_rows_impl(const KvView& kv, int64_t row, const Tensor& k, const Tensor& v, bool write) {
  const int64_t count = k.dim(0), heads = kv.kv_heads();
  check(kv.head_dim() <= kMaxHeadDim, write ? "kv_write" : "kv_read", " on cuda: head_dim ", kv.head_dim(),
        " above ", kMaxHeadDim);
  if (count == 0) return;
  const KvLayout l = layout_of(kv);
  auto* table = static_cast<unsigned char* const*>(
      stage(kBlockTable, kv.blocks, size_t(blocks_in_view(kv, row + count)) * sizeof(void*)));
  const float* signs = kv.format.codec == KvFormat::Codec::codebook ? rotation_signs(kv) : nullptr;
  const unsigned blocks = unsigned((count * heads * 2 + 127) / 128);  // a thread per (token, head, K or V)
  if (write) {
    launch("kv_write", kv_write_kernel, blocks, 128, 0, l, table, row, count, heads, k.data<float>(), v.data<float>(),
           signs);
  } else {
    launch("kv_read", kv_read_kernel, blocks, 128, 0, l, table, row, count, heads, k.data<float>(), v.data<float>(),
           signs);
  }
}

static_assert(sizeof(KvRowRef) == 32, "the memory contract bills 32 bytes of staged refs a row");

const KvRowRef* CudaBackend::stage_rows(std::span<const KvSegment> segments) {
  staged_tables_.clear();
  for (const KvSegment& s : segments)
    staged_tables_.insert(staged_tables_.end(), s.kv.blocks, s.kv.blocks + blocks_in_view(s.kv, s.kv.length));
  if (staged_tables_.empty()) staged_tables_.push_back(nullptr);  // nothing to read, yet an address to give
  auto* tables = static_cast<unsigned char* const*>(
      stage(kBlockTable, staged_tables_.data(), staged_tables_.size() * sizeof(void*)));
  staged_rows_.clear();
  size_t at = 0;
  for (const KvSegment& s : segments) {
    for (int64_t i = 0; i < s.rows; ++i)
      staged_rows_.push_back({tables + at, s.kv.row_offset, s.kv.first_position, s.first_position + i});
    at += size_t(blocks_in_view(s.kv, s.kv.length));
  }
  return static_cast<const KvRowRef*>(stage(kRowRefs, staged_rows_.data(), staged_rows_.size() * sizeof(KvRowRef)));
}

void CudaBackend::kv_write_impl(std::span<const KvSegment> segments, const Tensor& k, const Tensor& v) {
  const int64_t count = k.dim(0);
  if (count == 0) return;
  const KvView& kv = segments.front().kv;
  check(kv.head_dim() <= kMaxHeadDim, "kv_write on cuda: head_dim ", kv.head_dim(), " above ", kMaxHeadDim);
  // Rows of one format go in one launch for the whole step where a vector
  // kernel takes them; others segment by segment, a thread per row.
  const KvFormat& f = kv.format;
  const bool aligned = aligned16(k.raw()) && aligned16(v.raw());
  const bool plain = f.codec == KvFormat::Codec::plain;
  const bool vector = aligned && (plain ? f.head_dim % 4 == 0 : lanes_take_codes(f));
  const bool together = vector && std::all_of(segments.begin(), segments.end(),
                                              [&](const KvSegment& s) { return s.kv.format == f; });
  if (together) {
    KvLayout l = layout_of(kv);
    l.row_offset = l.first_position = l.length = 0;  // each row's come with its ref
    const KvRowRef* refs = stage_rows(segments);
    const int64_t heads = kv.kv_heads();
    if (plain) {
      const int64_t threads = count * heads * 2 * (f.head_dim / 4);
      launch("kv_write", kv_write_plain_kernel, unsigned((threads + 255) / 256), 256, 0, l, refs, count, heads,
             k.data<float>(), v.data<float>());
    } else {
      const float* signs = f.codec == KvFormat::Codec::codebook ? rotation_signs(kv) : nullptr;
      const int64_t threads = count * heads * 2 * (f.head_dim / 8);
      launch("kv_write", kv_write_coded_kernel, unsigned((threads + 127) / 128), 128, 0, l, refs, count, heads,
             k.data<float>(), v.data<float>(), signs);
    }
    return;
  }
  for (const KvSegment& s : segments)
    kv_rows_impl(s.kv, s.first_position - s.kv.first_position, k.slice_rows(s.row, s.row + s.rows),
                 v.slice_rows(s.row, s.row + s.rows), true);
}

void CudaBackend::rope_kv_write_impl(std::span<const KvSegment> segments, Tensor& q, Tensor& k, const Tensor& v,
                                     const QkNorms& norms, const Tensor& cos, const Tensor& sin) {
  const int64_t count = k.dim(0);
  if (count == 0) return;
  const KvFormat& f = segments.front().kv.format;
  const bool plain = f.codec == KvFormat::Codec::plain && f.head_dim <= kMaxHeadDim &&
                     std::all_of(segments.begin(), segments.end(), [&](const KvSegment& s) { return s.kv.format == f; });
  if (!plain) return Backend::rope_kv_write_impl(segments, q, k, v, norms, cos, sin);
  KvLayout l = layout_of(segments.front().kv);
  l.row_offset = l.first_position = l.length = 0;  // each row's come with its ref
  const KvRowRef* refs = stage_rows(segments);
  const HeadRows x = qk_rows(q, k, norms);
  const int64_t d = f.head_dim;
  launch("rope_kv_write", rope_kv_write_plain_kernel, unsigned(x.rows() + count * k.dim(1)), unsigned(row_threads(d)),
         size_t(d) * 4, x, v.data<float>(), l, refs, norms.eps, cos.data<float>(), sin.data<float>(), cos.dim(1));
}

void CudaBackend::kv_read_impl(const KvView& kv, int64_t row, Tensor& k, Tensor& v) { kv_rows_impl(kv, row, k, v, false); }

int64_t CudaBackend::key_splits(int64_t blocks, int64_t keys, int64_t min_keys, int64_t rows) const {
  return std::clamp<int64_t>((2 * ctx_->sm_count + blocks - 1) / blocks, 1,
                             std::min((keys + min_keys - 1) / min_keys,
                                      std::max<int64_t>(1, cuda_memory::kMaxPartialRows / rows)));
}

bool CudaBackend::decode_kernel_takes(const Tensor& q, std::span<const KvSegment> segments) {
  if (segments.empty()) return false;
  const KvFormat& f = segments.front().kv.format;
  const int64_t d = f.head_dim;
  const bool rows_suit = f.codec == KvFormat::Codec::plain ? f.dtype == DType::bf16 : lanes_take_codes(f);
  return rows_suit && (d == 64 || d == 128 || d == 256) &&
         std::all_of(segments.begin(), segments.end(),
                     [&](const KvSegment& s) { return s.kv.format == f && s.rows <= kDecodeMaxRows; });
}

namespace {

using DecodeKernel = void (*)(KvLayout, const KvRowRef*, const float*, int64_t, int64_t, float, int64_t, int64_t,
                              int64_t, float*);

// `narrow` (plain rows of 128 dims only: the one shape it changes).
template <class Rows>
DecodeKernel decode_kernel_for(int64_t d, int64_t g_max, bool narrow) {
  if constexpr (!Rows::kCoded) {
    if (narrow)
      return g_max == 2 ? attention_decode_kernel<128, 2, Rows, true> : attention_decode_kernel<128, 4, Rows, true>;
  }
  if (g_max == 2)
    return d == 64    ? attention_decode_kernel<64, 2, Rows, false>
           : d == 128 ? attention_decode_kernel<128, 2, Rows, false>
                      : attention_decode_kernel<256, 2, Rows, false>;
  return d == 64    ? attention_decode_kernel<64, 4, Rows, false>
         : d == 128 ? attention_decode_kernel<128, 4, Rows, false>
                    : attention_decode_kernel<256, 4, Rows, false>;
}

// A warp's keys per pass of the decode kernel.
template <bool kCoded>
int64_t decode_keys(int64_t d) {
  return d == 64 ? DecodeShape<64, kCoded, false>::kKeys : d == 128 ? DecodeShape<128, kCoded, false>::kKeys
                                                                    : DecodeShape<256, kCoded, false>::kKeys;
}

}  // namespace

void CudaBackend::attention_decode(const Tensor& q_in, std::span<const KvSegment> segments, const AttentionParams& p,
                                   Tensor& out) {
  const KvView& kv = segments.front().kv;
  const int64_t t = q_in.dim(0), heads = q_in.dim(1), d = kv.head_dim(), rows = t * heads;
  KvLayout l = layout_of(kv);
  l.row_offset = l.first_position = l.length = 0;  // each row's come with its ref
  const KvRowRef* refs = stage_rows(segments);
  const float* signs = nullptr;
  const float* q = queries_for(q_in, kv, signs);
  int64_t keys = 0;
  for (const KvSegment& s : segments) keys = std::max(keys, s.kv.length);
  // Two blocks per SM, down to one pass of the warps' keys per split; a
  // split past a shorter sequence's keys has nothing to do. Groups above 4
  // query heads take a block per 4 (registers); 1 or 2 take a narrower one.
  const int64_t group = heads / kv.kv_heads(), g_max = group <= 2 ? 2 : 4;
  const int64_t blocks = t * kv.kv_heads() * ((group + g_max - 1) / g_max);
  const bool coded = kv.format.codec != KvFormat::Codec::plain;
  // Narrow where the usual shape leaves less than a warp a scheduler.
  const int64_t wide_pass = kDecodeWarps * (coded ? decode_keys<true>(d) : decode_keys<false>(d));
  const bool narrow = !coded && d == 128 &&
                      blocks * key_splits(blocks, keys, wide_pass, rows) * kDecodeWarps < 4 * ctx_->sm_count;
  const int64_t pass = narrow ? kDecodeWarps * DecodeShape<128, false, true>::kKeys : wide_pass;
  const int64_t splits = key_splits(blocks, keys, pass, rows);
  const int64_t split_len = ((keys + splits - 1) / splits + pass - 1) / pass * pass;
  auto* partial = static_cast<float*>(scratch(kPartials, size_t(rows * splits * (d + 2)) * sizeof(float)));
  const dim3 grid{unsigned(blocks), unsigned(splits)};
  const DecodeKernel kernel = !coded ? decode_kernel_for<PlainBf16Rows>(d, g_max, narrow)
                              : kv.format.codec == KvFormat::Codec::affine
                                  ? decode_kernel_for<CodedRows<1>>(d, g_max, narrow)
                                  : decode_kernel_for<CodedRows<2>>(d, g_max, narrow);
  launch("attention: decode rows", kernel, grid, 32 * kDecodeWarps, 0, l, refs, q, heads, kv.kv_heads(), p.scale,
         p.window.value_or(0), splits, split_len, partial);
  // Decode's splits are many and its rows few: a block a row.
  launch("attention: combine the splits", attention_combine_kernel, unsigned(rows), 32 * kCombineWarps, 0, partial,
         splits, d, out.data<float>(), ctx_->release_before_wait);
  if (signs) rotate_rows(out.data<float>(), rows, d, signs, true);
}

const float* CudaBackend::queries_for(const Tensor& q, const KvView& kv, const float*& signs) {
  signs = nullptr;
  if (kv.format.codec != KvFormat::Codec::codebook) return q.data<float>();
  signs = rotation_signs(kv);
  auto* rq = static_cast<float*>(scratch(kRotatedQ, q.nbytes()));
  device_copy(rq, q.data<float>(), q.nbytes());
  rotate_rows(rq, q.dim(0) * q.dim(1), kv.head_dim(), signs, false);
  return rq;
}

void CudaBackend::rotate_rows(float* x, int64_t rows, int64_t d, const float* signs, bool inverse) {
  const char* op = inverse ? "attention: rotate the output back" : "attention: rotate q";
  if (lanes_take_rows(d)) {
    const int64_t threads = rows * (d / 8);
    return launch(op, rotate_rows_lanes_kernel, unsigned((threads + 127) / 128), 128, 0, x, rows, d, signs, inverse);
  }
  launch(op, rotate_rows_kernel, unsigned((rows + 127) / 128), 128, 0, x, rows, d, signs, inverse);
}

void CudaBackend::combine_splits(const float* partial, int64_t rows, int64_t splits, int64_t d, float* out) {
  if (splits <= kCombineRowsMaxSplits)
    return launch("attention: combine the splits", attention_combine_rows_kernel,
                  unsigned((rows + kCombineRowsPerBlock - 1) / kCombineRowsPerBlock), 32 * kCombineRowsPerBlock, 0,
                  partial, rows, splits, d, out);
  launch("attention: combine the splits", attention_combine_kernel, unsigned(rows), 32 * kCombineWarps, 0, partial,
         splits, d, out, ctx_->release_before_wait);
}

void CudaBackend::attention_impl(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p,
                                 Tensor& out) {
  if (q.dim(0) == 0) return;
  check(q.dim(2) <= kMaxHeadDim, "attention on cuda: head_dim ", q.dim(2), " above ", kMaxHeadDim);
  if (decode_kernel_takes(q, segments)) return attention_decode(q, segments, p, out);
  attend_each_segment(q, segments, p, out, [this](const Tensor& qs, const KvView& kv, const AttentionParams& at,
                                                  Tensor& rows) { attend_view(qs, kv, at, rows); });
}

void CudaBackend::attend_view(const Tensor& q_in, const KvView& kv, const AttentionParams& p, Tensor& out) {
  const int64_t t = q_in.dim(0), heads = q_in.dim(1), d = kv.head_dim();
  if (t == 0) return;
  const KvLayout l = layout_of(kv);
  auto* table = static_cast<unsigned char* const*>(
      stage(kBlockTable, kv.blocks, size_t(blocks_in_view(kv, kv.length)) * sizeof(void*)));
  const float* signs = nullptr;
  const float* q = queries_for(q_in, kv, signs);
  // Keys split so that decode (one query row) still fills the GPU; the
  // partials are capped at kMaxPartialWarps (query rows × heads × splits).
  constexpr int64_t kMaxPartialWarps = cuda_memory::kMaxPartialRows;
  const int64_t rows = t * heads, group = heads / kv.kv_heads();
  if (flash_attention_suits(kv, p, t)) {
    const int64_t splits = flash_attention_splits(kv, t, heads);
    auto* partial =
        splits > 1 ? static_cast<float*>(scratch(kPartials, size_t(rows * splits * (d + 2)) * sizeof(float))) : nullptr;
    flash_attention(l, table, q, t, heads, kv, p, splits, partial, out.data<float>());
    if (splits > 1)
      combine_splits(partial, rows, splits, d, out.data<float>());
    return;
  }
  static_assert(kTileKeys == cuda_memory::kMinSplitKeys, "the memory contract bills splits of a tile's keys");
  const bool tiled = d <= kTiledMaxHeadDim && group <= kTileQueries;
  const int64_t split_keys = tiled ? 256 : 64;
  // Blocks without splitting the keys; a decode row has only one per kv head,
  // so its keys are split further until the GPU has two blocks per SM (down
  // to one key tile per split).
  const int64_t row_blocks =
      tiled ? (t + kTileQueries / group - 1) / (kTileQueries / group) * kv.kv_heads() : (rows * 32 + 255) / 256;
  const int64_t fill =
      std::min<int64_t>((2 * ctx_->sm_count + row_blocks - 1) / row_blocks, (kv.length + kTileKeys - 1) / kTileKeys);
  const int64_t splits = std::clamp<int64_t>(std::max((kv.length + split_keys - 1) / split_keys, fill), 1,
                                             std::max<int64_t>(1, kMaxPartialWarps / rows));
  const int64_t split_len = (kv.length + splits - 1) / splits;
  auto* partial = static_cast<float*>(scratch(kPartials, size_t(rows * splits * (d + 2)) * sizeof(float)));
  if (tiled) {
    const int64_t rows_per_tile = kTileQueries / group;
    const dim3 grid(unsigned((t + rows_per_tile - 1) / rows_per_tile), unsigned(kv.kv_heads()), unsigned(splits));
    launch("attention", attention_tiled_kernel, grid, kTiledThreads, 0, l, table, q, t, heads, kv.kv_heads(), p.scale,
           p.first_position, p.window.value_or(0), splits, split_len, partial);
  } else {
    const dim3 grid(unsigned((rows * 32 + 255) / 256), unsigned(splits));
    launch("attention", attention_split_kernel, grid, 256, 0, l, table, q, t, heads, kv.kv_heads(), p.scale,
           p.first_position, p.window.value_or(0), splits, split_len, partial);
  }
  combine_splits(partial, rows, splits, d, out.data<float>());
  if (signs) {
    rotate_rows(out.data<float>(), t * heads, d, signs, true);
  }
}

}  // namespace fathom::cuda
