// The CUDA backend's norms, activations, row movement, routing and Gated
// DeltaNet ops. Each mirrors the CPU op's arithmetic (f32 throughout); sums
// are reduced in a different order, so results agree to rounding.
#include <algorithm>

#include "backend/cuda/activations.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/head_rows.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {

constexpr int kThreads = 256;

int blocks(int64_t n) { return int(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535))); }

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void rms_norm_rows(const float* x, const float* w, float eps, int64_t d, float* y) {
  await_previous_kernel();
  const float* xr = x + blockIdx.x * d;
  float* yr = y + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
  const float inv = 1.0f / sqrtf(block_sum(ss) / float(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = w[i] * (xr[i] * inv);
}

// add then rms_norm_rows in one pass over the row (the same sums, so the
// same results); out may be y: every y[i] is read before the block's sum.
__global__ void add_rms_norm_rows(float* x, const float* y, const float* w, float eps, int64_t d, float* out) {
  await_previous_kernel();
  float* xr = x + blockIdx.x * d;
  const float* yr = y + blockIdx.x * d;
  float* outr = out + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = xr[i] + yr[i];
    xr[i] = v;
    ss += v * v;
  }
  const float inv = 1.0f / sqrtf(block_sum(ss) / float(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) outr[i] = w[i] * (xr[i] * inv);
}

// rms_norm_rows and add_rms_norm_rows for rows of 4·V·blockDim.x floats or
// fewer, held in registers as V float4s a thread: one read of x and y, no
// second pass over memory. At batch 1 a norm is one block between two GEMVs,
// so its latency, not its bytes, is what the step pays. w is a weight (no
// kernel writes it): it is loaded before waiting for the kernel before.
template <int V, bool Add>
__global__ void norm_rows_in_registers(float* x, const float* y, const float* w, float eps, int d4, float* out,
                                       bool release_first) {
  float4 wv[V], v[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < d4) wv[k] = __ldg(reinterpret_cast<const float4*>(w) + i);
  }
  await_previous_kernel(release_first);
  const int64_t row = int64_t(blockIdx.x) * d4;
  float4* xr = reinterpret_cast<float4*>(x) + row;
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i >= d4) continue;
    float4 a = xr[i];
    if constexpr (Add) {
      const float4 b = reinterpret_cast<const float4*>(y)[row + i];
      a = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
      xr[i] = a;
    }
    v[k] = a;
    ss += (a.x * a.x + a.y * a.y) + (a.z * a.z + a.w * a.w);
  }
  const float inv = 1.0f / sqrtf(block_sum(ss) / float(4 * d4) + eps);
  float4* outr = reinterpret_cast<float4*>(out) + row;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < d4)
      outr[i] = make_float4(wv[k].x * (v[k].x * inv), wv[k].y * (v[k].y * inv), wv[k].z * (v[k].z * inv),
                            wv[k].w * (v[k].w * inv));
  }
}

// One block per head vector: normed into shared memory (head_dim floats),
// then rotated as rope_rows does and written back.
__global__ void rms_norm_rope_rows(HeadRows x, float eps, const float* cos, const float* sin, int64_t head_dim,
                                   int64_t half) {
  await_previous_kernel();
  extern __shared__ float normed[];
  const float* w;
  int64_t ti;
  float* xr = x.at(blockIdx.x, head_dim, w, ti);
  norm_rope_head(xr, w, eps, cos, sin, ti, head_dim, half, normed);
}

__global__ void rope_rows(HeadRows x, const float* cos, const float* sin, int64_t head_dim, int64_t half) {
  await_previous_kernel();
  GRID_STRIDE(idx, x.rows() * half) {
    const int64_t i = idx % half;
    const float* w;
    int64_t ti;
    float* v = x.at(idx / half, head_dim, w, ti);
    const float c = cos[ti * half + i], s = sin[ti * half + i];
    const float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

// out = Act(gate) · up (SiLU, GELU-tanh), a value a thread; gate_mul_x4 four
// (16-byte accesses), where the sizes and pointers allow: a prefill chunk's
// gate and up are tens of MB each.
template <float (*Act)(float)>
__global__ void gate_mul_kernel(const float* gate, const float* up, float* out, int64_t n) {
  await_previous_kernel();
  GRID_STRIDE(i, n) out[i] = Act(gate[i]) * up[i];
}

template <float (*Act)(float)>
__global__ void gate_mul_x4(const float4* gate, const float4* up, float4* out, int64_t n4, bool release_first) {
  await_previous_kernel(release_first);
  GRID_STRIDE(i, n4) {
    const float4 g = gate[i], u = up[i];
    out[i] = make_float4(Act(g.x) * u.x, Act(g.y) * u.y, Act(g.z) * u.z, Act(g.w) * u.w);
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  await_previous_kernel();
  GRID_STRIDE(i, n) x[i] += y[i];
}

__global__ void fill_kernel(float* x, float v, int64_t n) {
  await_previous_kernel();
  GRID_STRIDE(i, n) x[i] = v;
}

__global__ void scale_kernel(float* x, float s, int64_t n) {
  await_previous_kernel();
  GRID_STRIDE(i, n) x[i] *= s;
}

__global__ void soft_cap_kernel(float* x, float cap, int64_t n) {
  await_previous_kernel();
  GRID_STRIDE(i, n) x[i] = tanhf(x[i] / cap) * cap;
}

__global__ void mul_columns_kernel(float* x, const float* w, int64_t d, int64_t n) {
  await_previous_kernel();
  GRID_STRIDE(i, n) x[i] *= w[i % d];
}

__global__ void sigmoid_mul_kernel(float* x, const float* gate, int64_t per, int64_t n) {
  await_previous_kernel();
  GRID_STRIDE(i, n) x[i] *= sigmoidf(gate[i / per]);
}

template <typename T>
__device__ __forceinline__ float widen(T v);
template <>
__device__ __forceinline__ float widen(float v) { return v; }
template <>
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }

template <typename T>
__global__ void embedding_kernel(const T* table, const int32_t* ids, int64_t n, int64_t d, float* out) {
  await_previous_kernel();
  GRID_STRIDE(i, n * d) out[i] = widen(table[int64_t(ids[i / d]) * d + i % d]);
}

__global__ void copy_columns_kernel(const float* src, int64_t ls, int64_t src_col, float* dst, int64_t ld,
                                    int64_t dst_col, int64_t rows, int64_t width) {
  await_previous_kernel();
  GRID_STRIDE(i, rows * width) {
    const int64_t r = i / width, c = i % width;
    dst[r * ld + dst_col + c] = src[r * ls + src_col + c];
  }
}

__global__ void gather_rows_kernel(const float* src, const int32_t* rows, int64_t n, int64_t d, float* dst) {
  await_previous_kernel();
  GRID_STRIDE(i, n * d) dst[i] = src[int64_t(rows[i / d]) * d + i % d];
}

// One thread per column, rows in order: repeated destination rows add in order of i.
__global__ void scatter_add_rows_kernel(const float* src, const int32_t* rows, const float* weights, int64_t n,
                                        int64_t d, float* dst) {
  await_previous_kernel();
  GRID_STRIDE(c, d)
  for (int64_t i = 0; i < n; ++i) dst[int64_t(rows[i]) * d + c] += src[i * d + c] * weights[i];
}

// One warp per token: the softmax's max and sum over the experts, then k
// rounds that each take the most probable expert after the last one taken
// (by probability, the lower index first among equals, as on the CPU). A
// probability is recomputed where it is compared, the same way each time, so
// nothing is stored; NaNs are never taken.
__global__ void route_top_k_kernel(const float* logits, int64_t t, int64_t e, int64_t k, bool renormalize,
                                   const float* expert_scale, int32_t* ids, float* weights) {
  await_previous_kernel();
  const int lane = threadIdx.x % 32;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= t) return;
  const float* l = logits + row * e;
  float mx = -INFINITY;
  for (int64_t i = lane; i < e; i += 32) mx = fmaxf(mx, l[i]);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.0f;
  for (int64_t i = lane; i < e; i += 32) sum += expf(l[i] - mx);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  float prev_p = INFINITY, total = 0.0f;
  int prev_i = -1;
  for (int64_t j = 0; j < k; ++j) {
    float bp = 0.0f;
    int bi = -1;
    for (int64_t i = lane; i < e; i += 32) {
      const float p = expf(l[i] - mx) / sum;
      const bool after = p < prev_p || (p == prev_p && int(i) > prev_i);
      if (after && (bi < 0 || p > bp)) bp = p, bi = int(i);
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float op = __shfl_xor_sync(0xffffffffu, bp, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi >= 0 && (bi < 0 || op > bp || (op == bp && oi < bi))) bp = op, bi = oi;
    }
    if (lane == 0) {
      ids[row * k + j] = bi;
      weights[row * k + j] = bp;
    }
    total += bp;
    prev_p = bp, prev_i = bi;
  }
  if (lane == 0)
    for (int64_t j = 0; j < k; ++j) {
      if (renormalize) weights[row * k + j] /= total;
      if (expert_scale && ids[row * k + j] >= 0) weights[row * k + j] *= expert_scale[ids[row * k + j]];
    }
}

// One thread per channel, tokens in order; the window lives in the state.
__global__ void conv1d_silu_kernel(const float* x, int64_t t, int64_t channels, const float* weight, int64_t kernel,
                                   float* state, float* out) {
  await_previous_kernel();
  GRID_STRIDE(c, channels) {
    const int64_t past = kernel - 1;
    const float* w = weight + c * kernel;
    float* s = state + c * past;
    for (int64_t ti = 0; ti < t; ++ti) {
      float acc = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t src = ti - past + j;  // token index; negative reads the state
        acc += w[j] * (src < 0 ? s[past + src] : x[src * channels + c]);
      }
      out[ti * channels + c] = siluf(acc);
    }
    // The state becomes the last `past` inputs of state ++ x (index t + j > j, so in place).
    for (int64_t j = 0; j < past; ++j) {
      const int64_t idx = t + j;
      s[j] = idx < past ? s[idx] : x[(idx - past) * channels + c];
    }
  }
}

// One warp per (row, head).
__global__ void l2_norm_heads_kernel(float* x, int64_t rows, int64_t cols, int64_t first_col, int64_t heads,
                                     int64_t head_dim, float scale, float eps) {
  await_previous_kernel();
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows * heads) return;
  float* v = x + (warp / heads) * cols + first_col + (warp % heads) * head_dim;
  float ss = 0.0f;
  for (int64_t i = lane; i < head_dim; i += 32) ss += v[i] * v[i];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = scale / sqrtf(ss + eps);
  for (int64_t i = lane; i < head_dim; i += 32) v[i] *= inv;
}

__global__ void delta_gates_kernel(float* b, float* a, const float* neg_a, const float* dt_bias, int64_t hv,
                                   int64_t n) {
  await_previous_kernel();
  GRID_STRIDE(i, n) {
    b[i] = sigmoidf(b[i]);
    const float x = a[i] + dt_bias[i % hv];
    a[i] = neg_a[i % hv] * (x > 20.0f ? x : log1pf(expf(x)));  // PyTorch's softplus
  }
}

// The rule token by token. Column b of a value head's state [dk, dv] only
// ever meets column b of the update, so one thread owns one column (its dk
// values in registers) and the head's q, k of each token sit in shared memory.
template <int kMaxDk>
__global__ void delta_rule_kernel(const float* qkv, int64_t stride, int64_t key_dim, const float* g,
                                  const float* beta, int64_t t, int64_t hv, int64_t group, int64_t dk, int64_t dv,
                                  float* state, float* out, float* history, int64_t history_rows,
                                  int64_t history_row) {
  await_previous_kernel();
  __shared__ float qs[kMaxDk], ks[kMaxDk];
  const int64_t h = blockIdx.x, b = threadIdx.x, kh = h / group;
  float s[kMaxDk];
  float* col = state + h * dk * dv + b;
  if (b < dv)
    for (int64_t a = 0; a < dk; ++a) s[a] = col[a * dv];
  for (int64_t ti = 0; ti < t; ++ti) {
    const float* row = qkv + ti * stride;
    __syncthreads();
    for (int64_t a = threadIdx.x; a < dk; a += blockDim.x) {
      qs[a] = row[kh * dk + a];
      ks[a] = row[key_dim + kh * dk + a];
    }
    __syncthreads();
    if (b >= dv) continue;
    const float decay = expf(g[ti * hv + h]), bt = beta[ti * hv + h];
    const float v = row[2 * key_dim + h * dv + b];
    float pred = 0.0f;
    for (int64_t a = 0; a < dk; ++a) {
      s[a] *= decay;
      pred += ks[a] * s[a];
    }
    const float delta = (v - pred) * bt;
    float o = 0.0f;
    for (int64_t a = 0; a < dk; ++a) {
      s[a] += ks[a] * delta;
      o += qs[a] * s[a];
    }
    out[(ti * hv + h) * dv + b] = o;
    const int64_t hr = history_row + ti;
    if (history && hr < history_rows)
      for (int64_t a = 0; a < dk; ++a) history[((hr * hv + h) * dk + a) * dv + b] = s[a];
  }
  if (b < dv)
    for (int64_t a = 0; a < dk; ++a) col[a * dv] = s[a];
}

__global__ void gated_rms_norm_rows(float* x, const float* z, const float* w, float eps, int64_t d) {
  await_previous_kernel();
  float* xr = x + blockIdx.x * d;
  const float* zr = z + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
  const float inv = 1.0f / sqrtf(block_sum(ss) / float(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) xr[i] = w[i] * (xr[i] * inv) * siluf(zr[i]);
}

}  // namespace

// Rows of up to 16,384 floats, a multiple of 4, on aligned rows go through
// norm_rows_in_registers: V float4s a thread, at most 512 threads.
bool CudaBackend::norm_rows_fast(const char* op, float* x, const float* y, const float* w, float eps, int64_t d,
                                 int64_t rows, float* out) {
  const int64_t d4 = d / 4;
  if (d % 4 != 0 || d4 > 8 * 512 || !aligned16(x) || !aligned16(y) || !aligned16(w) || !aligned16(out)) return false;
  const auto go = [&]<int V>(std::integral_constant<int, V>) {
    const int threads = int((d4 + V - 1) / V + 31) / 32 * 32;
    const bool release = ctx_->release_before_wait;
    if (y) launch(op, norm_rows_in_registers<V, true>, unsigned(rows), threads, 0, x, y, w, eps, int(d4), out, release);
    else launch(op, norm_rows_in_registers<V, false>, unsigned(rows), threads, 0, x, y, w, eps, int(d4), out, release);
  };
  if (d4 <= 512) go(std::integral_constant<int, 1>{});
  else if (d4 <= 2 * 512) go(std::integral_constant<int, 2>{});
  else if (d4 <= 4 * 512) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 8>{});
  return true;
}

void CudaBackend::rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
  const int64_t d = w.numel(), rows = x.numel() / d;
  if (rows == 0) return;
  // x is read only (the kernel writes x only when it adds y).
  if (norm_rows_fast("rms_norm", const_cast<float*>(x.data<float>()), nullptr, w.data<float>(), eps, d, rows,
                     y.data<float>()))
    return;
  launch("rms_norm", rms_norm_rows, unsigned(rows), row_threads(d), 0, x.data<float>(), w.data<float>(), eps, d,
         y.data<float>());
}

void CudaBackend::rope_impl(Tensor& x, const Tensor& cos, const Tensor& sin) {
  rope_heads({x.data<float>(), nullptr, x.dim(1), nullptr, nullptr, 0, x.dim(0)}, x.dim(2), cos, sin);
}

void CudaBackend::rope_qk_impl(Tensor& q, Tensor& k, const QkNorms& norms, const Tensor& cos, const Tensor& sin) {
  const HeadRows x = qk_rows(q, k, norms);
  if (norms.q) norm_rope_heads(x, q.dim(2), norms.eps, cos, sin);
  else rope_heads(x, q.dim(2), cos, sin);
}

void CudaBackend::rope_heads(const HeadRows& x, int64_t head_dim, const Tensor& cos, const Tensor& sin) {
  const int64_t n = x.rows() * cos.dim(1);
  if (n == 0) return;
  launch("rope", rope_rows, blocks(n), kThreads, 0, x, cos.data<float>(), sin.data<float>(), head_dim, cos.dim(1));
}

void CudaBackend::add_rms_norm_impl(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) {
  const int64_t d = w.numel(), rows = x.numel() / d;
  if (rows == 0) return;
  if (norm_rows_fast("add_rms_norm", x.data<float>(), y.data<float>(), w.data<float>(), eps, d, rows,
                     out.data<float>()))
    return;
  launch("add_rms_norm", add_rms_norm_rows, unsigned(rows), row_threads(d), 0, x.data<float>(), y.data<float>(),
         w.data<float>(), eps, d, out.data<float>());
}

void CudaBackend::rms_norm_rope_impl(Tensor& x, const Tensor& w, float eps, const Tensor& cos, const Tensor& sin) {
  norm_rope_heads({x.data<float>(), w.data<float>(), x.dim(1), nullptr, nullptr, 0, x.dim(0)}, x.dim(2), eps, cos,
                  sin);
}

void CudaBackend::norm_rope_heads(const HeadRows& x, int64_t head_dim, float eps, const Tensor& cos,
                                  const Tensor& sin) {
  if (x.rows() == 0) return;
  launch("rms_norm_rope", rms_norm_rope_rows, unsigned(x.rows()), row_threads(head_dim), size_t(head_dim) * 4, x, eps,
         cos.data<float>(), sin.data<float>(), head_dim, cos.dim(1));
}

void CudaBackend::gate_mul(const char* op, void (*x4)(const float4*, const float4*, float4*, int64_t, bool),
                           void (*one)(const float*, const float*, float*, int64_t), const Tensor& gate,
                           const Tensor& up, Tensor& out) {
  const int64_t n = gate.numel();
  if (n == 0) return;
  if (n % 4 == 0 && aligned16(gate.raw()) && aligned16(up.raw()) && aligned16(out.raw()))
    return launch(op, x4, blocks(n / 4), kThreads, 0, gate.data<float4>(), up.data<float4>(), out.data<float4>(),
                  n / 4, ctx_->release_before_wait);
  launch(op, one, blocks(n), kThreads, 0, gate.data<float>(), up.data<float>(), out.data<float>(), n);
}

void CudaBackend::silu_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) {
  gate_mul("silu_mul", gate_mul_x4<siluf>, gate_mul_kernel<siluf>, gate, up, out);
}

void CudaBackend::gelu_tanh_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) {
  gate_mul("gelu_tanh_mul", gate_mul_x4<gelu_tanhf>, gate_mul_kernel<gelu_tanhf>, gate, up, out);
}

void CudaBackend::add_inplace_impl(Tensor& x, const Tensor& y) {
  if (x.numel() == 0) return;
  launch("add", add_kernel, blocks(x.numel()), kThreads, 0, x.data<float>(), y.data<float>(), x.numel());
}

void CudaBackend::fill_impl(Tensor& x, float value) {
  if (x.numel() == 0) return;
  launch("fill", fill_kernel, blocks(x.numel()), kThreads, 0, x.data<float>(), value, x.numel());
}

void CudaBackend::embedding_impl(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out) {
  const int64_t n = int64_t(ids.size()), d = table.dim(1);
  if (n == 0) return;
  const auto* dev_ids = static_cast<const int32_t*>(stage(kIds, ids.data(), ids.size() * 4));
  switch (table.dtype()) {
    case DType::f32:
      launch("embedding", embedding_kernel<float>, blocks(n * d), kThreads, 0, table.data<float>(), dev_ids, n, d,
             out.data<float>());
      break;
    case DType::bf16:
      launch("embedding", embedding_kernel<__nv_bfloat16>, blocks(n * d), kThreads, 0,
             static_cast<const __nv_bfloat16*>(table.raw()), dev_ids, n, d, out.data<float>());
      break;
    case DType::f16:
      launch("embedding", embedding_kernel<__half>, blocks(n * d), kThreads, 0, static_cast<const __half*>(table.raw()),
             dev_ids, n, d, out.data<float>());
      break;
    case DType::affine:
      affine_embedding(table, dev_ids, n, out);
      break;
    case DType::i32:
    case DType::u32:
      fail("embedding: a ", dtype_name(table.dtype()), " table is not supported on cuda");
  }
}

void CudaBackend::scale_impl(Tensor& x, float s) {
  if (x.numel() == 0) return;
  launch("scale", scale_kernel, blocks(x.numel()), kThreads, 0, x.data<float>(), s, x.numel());
}

void CudaBackend::soft_cap_impl(Tensor& x, float cap) {
  if (x.numel() == 0) return;
  launch("soft_cap", soft_cap_kernel, blocks(x.numel()), kThreads, 0, x.data<float>(), cap, x.numel());
}

void CudaBackend::mul_columns_impl(Tensor& x, const Tensor& w) {
  if (x.numel() == 0) return;
  launch("mul_columns", mul_columns_kernel, blocks(x.numel()), kThreads, 0, x.data<float>(), w.data<float>(), w.numel(),
         x.numel());
}

void CudaBackend::sigmoid_mul_impl(Tensor& x, const Tensor& gate) {
  if (x.numel() == 0) return;
  const int64_t per = gate.numel() == x.numel() ? 1 : x.numel() / x.dim(0);
  launch("sigmoid_mul", sigmoid_mul_kernel, blocks(x.numel()), kThreads, 0, x.data<float>(), gate.data<float>(), per,
         x.numel());
}

void CudaBackend::copy_columns_impl(const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col, int64_t width) {
  const int64_t rows = src.dim(0);
  if (rows * width == 0) return;
  launch("copy_columns", copy_columns_kernel, blocks(rows * width), kThreads, 0, src.data<float>(), src.dim(1), src_col,
         dst.data<float>(), dst.dim(1), dst_col, rows, width);
}

void CudaBackend::gather_rows_impl(const Tensor& src, const std::vector<int32_t>& rows, Tensor& dst) {
  const int64_t n = int64_t(rows.size()), d = src.dim(1);
  if (n * d == 0) return;
  const auto* dev_rows = static_cast<const int32_t*>(stage(kRows, rows.data(), rows.size() * 4));
  launch("gather_rows", gather_rows_kernel, blocks(n * d), kThreads, 0, src.data<float>(), dev_rows, n, d,
         dst.data<float>());
}

void CudaBackend::scatter_add_rows_impl(const Tensor& src, const std::vector<int32_t>& rows,
                                        const std::vector<float>& weights, Tensor& dst) {
  const int64_t n = int64_t(rows.size()), d = src.dim(1);
  if (n * d == 0) return;
  const auto* dev_rows = static_cast<const int32_t*>(stage(kRows, rows.data(), rows.size() * 4));
  const auto* dev_weights = static_cast<const float*>(stage(kWeights, weights.data(), weights.size() * 4));
  launch("scatter_add_rows", scatter_add_rows_kernel, blocks(d), kThreads, 0, src.data<float>(), dev_rows, dev_weights,
         n, d, dst.data<float>());
}

void CudaBackend::route_top_k_impl(const Tensor& logits, int64_t k, bool renormalize, const Tensor* expert_scale,
                                   Tensor& ids, Tensor& weights) {
  const int64_t t = logits.dim(0), e = logits.dim(1);
  if (t == 0) return;
  launch("route_top_k", route_top_k_kernel, blocks(t * 32), kThreads, 0, logits.data<float>(), t, e, k, renormalize,
         expert_scale ? expert_scale->data<float>() : nullptr, ids.data<int32_t>(), weights.data<float>());
}

void CudaBackend::causal_conv1d_silu_impl(const Tensor& x, const Tensor& weight, Tensor& state, Tensor& out) {
  const int64_t channels = x.dim(1);
  launch("causal_conv1d_silu", conv1d_silu_kernel, blocks(channels), kThreads, 0, x.data<float>(), x.dim(0), channels,
         weight.data<float>(), weight.dim(1), state.data<float>(), out.data<float>());
}

void CudaBackend::l2_norm_heads_impl(Tensor& x, int64_t first_col, int64_t heads, int64_t head_dim, float scale,
                                     float eps) {
  const int64_t warps = x.dim(0) * heads;
  if (warps == 0) return;
  launch("l2_norm_heads", l2_norm_heads_kernel, blocks(warps * 32), kThreads, 0, x.data<float>(), x.dim(0), x.dim(1),
         first_col, heads, head_dim, scale, eps);
}

void CudaBackend::delta_rule_gates_impl(Tensor& b, Tensor& a, const Tensor& neg_a, const Tensor& dt_bias) {
  if (b.numel() == 0) return;
  launch("delta_rule_gates", delta_gates_kernel, blocks(b.numel()), kThreads, 0, b.data<float>(), a.data<float>(),
         neg_a.data<float>(), dt_bias.data<float>(), b.dim(1), b.numel());
}

void CudaBackend::gated_delta_rule_impl(const DeltaRuleShape& shape, const Tensor& qkv, const Tensor& g,
                                        const Tensor& beta, int64_t /*chunk*/, Tensor& state, Tensor& out,
                                        Tensor* history, int64_t history_row) {
  // The chunked form is the same recurrence up to rounding; this first kernel
  // runs every call token by token (a chunked kernel is future work).
  const int64_t dk = shape.key_head_dim, dv = shape.value_head_dim, hv = shape.value_heads;
  check(dk <= 256, "gated_delta_rule on cuda: key_head_dim ", dk, " above 256 is not supported");
  check(dv <= 1024, "gated_delta_rule on cuda: value_head_dim ", dv, " above 1024 is not supported");
  const int threads = int(std::max<int64_t>(32, (dv + 31) / 32 * 32));
  float* hist = history ? history->data<float>() : nullptr;
  const int64_t hist_rows = history ? history->dim(0) : 0;
  const int64_t group = hv / shape.key_heads;
  if (dk <= 128)
    launch("gated_delta_rule", delta_rule_kernel<128>, unsigned(hv), threads, 0, qkv.data<float>(), qkv.dim(1),
           shape.key_dim(), g.data<float>(), beta.data<float>(), qkv.dim(0), hv, group, dk, dv, state.data<float>(),
           out.data<float>(), hist, hist_rows, history_row);
  else
    launch("gated_delta_rule", delta_rule_kernel<256>, unsigned(hv), threads, 0, qkv.data<float>(), qkv.dim(1),
           shape.key_dim(), g.data<float>(), beta.data<float>(), qkv.dim(0), hv, group, dk, dv, state.data<float>(),
           out.data<float>(), hist, hist_rows, history_row);
}

void CudaBackend::gated_rms_norm_impl(Tensor& x, const Tensor& z, const Tensor& w, float eps) {
  const int64_t rows = x.dim(0), d = x.dim(1);
  if (rows == 0) return;
  launch("gated_rms_norm", gated_rms_norm_rows, unsigned(rows), row_threads(d), 0, x.data<float>(), z.data<float>(),
         w.data<float>(), eps, d);
}

}  // namespace fathom::cuda
