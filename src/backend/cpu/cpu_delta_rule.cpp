// The CPU backend's Gated DeltaNet ops and their kernels (delta_rule.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/delta_rule.h"
#include "core/error.h"

namespace fathom::cpu {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }
// PyTorch's softplus (beta 1, threshold 20): linear above the threshold.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x ← x · scale / sqrt(Σx² + eps), the FLA-compatible L2 norm transformers applies to q and k.
void l2_normalize(float* x, int64_t n, float scale, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// Splits [0, value_heads) over the thread pool. The kernel gets one pointer,
// so the std::function holds it without allocating.
template <typename Job>
void for_each_value_head(int64_t heads, const Job& job) {
  const Job* p = &job;
  ThreadPool::global().parallel_for(heads, 1, [p](int64_t begin, int64_t end) { (*p)(begin, end); });
}

}  // namespace

void causal_conv1d_silu(const float* x, int64_t t, int64_t channels, int64_t stride, const float* weight,
                        int64_t kernel, float* state, float* out) {
  const int64_t past = kernel - 1;
  // Input j of the window ending at token ti: the state for j < past - ti, else x.
  for (int64_t ti = 0; ti < t; ++ti) {
    float* o = out + ti * stride;
    for (int64_t c = 0; c < channels; ++c) {
      const float* w = weight + c * kernel;
      float acc = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t src = ti - past + j;  // token index; negative reads the state
        acc += w[j] * (src < 0 ? state[c * past + past + src] : x[src * stride + c]);
      }
      o[c] = silu(acc);
    }
  }
  // The state becomes the last `past` inputs of state ++ x; position j reads
  // index t + j > j of that sequence, so the shift can run in place.
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t j = 0; j < past; ++j) {
      const int64_t idx = t + j;
      state[c * past + j] = idx < past ? state[c * past + idx] : x[(idx - past) * stride + c];
    }
}

void gated_delta_rule_recurrent(const DeltaRuleShape& d, const DeltaRuleInputs& in, float* state, float* out,
                                float* const* copies) {
  const int64_t hv = d.value_heads, dk = d.key_head_dim, dv = d.value_head_dim;
  const int64_t group = d.value_heads / d.key_heads;
  auto job = [&](int64_t h0, int64_t h1) {
    thread_local std::vector<float> delta_buf;
    if (int64_t(delta_buf.size()) < dv) delta_buf.resize(size_t(dv));
    float* delta = delta_buf.data();
    for (int64_t h = h0; h < h1; ++h) {
      float* s = state + h * dk * dv;  // [dk, dv]
      const int64_t kh = h / group;
      for (int64_t ti = 0; ti < in.t; ++ti) {
        const float* q = in.q + ti * in.q_stride + kh * dk;
        const float* k = in.k + ti * in.k_stride + kh * dk;
        const float* v = in.v + ti * in.v_stride + h * dv;
        const float decay = std::exp(in.g[ti * hv + h]), beta = in.beta[ti * hv + h];
        float* o = out + (ti * hv + h) * dv;
        // Decay the state and read what it predicts for k: delta starts as Sᵀk.
        std::fill(delta, delta + dv, 0.0f);
        for (int64_t a = 0; a < dk; ++a) {
          float* row = s + a * dv;
          const float ka = k[a];
          for (int64_t b = 0; b < dv; ++b) {
            row[b] *= decay;
            delta[b] += ka * row[b];
          }
        }
        for (int64_t b = 0; b < dv; ++b) delta[b] = (v[b] - delta[b]) * beta;
        // Write the correction and read the output with the updated state.
        std::fill(o, o + dv, 0.0f);
        for (int64_t a = 0; a < dk; ++a) {
          float* row = s + a * dv;
          const float ka = k[a], qa = q[a];
          for (int64_t b = 0; b < dv; ++b) {
            row[b] += ka * delta[b];
            o[b] += qa * row[b];
          }
        }
        // The head's state is still in cache: copying it here is a streaming write.
        if (copies && copies[ti]) std::memcpy(copies[ti] + h * dk * dv, s, size_t(dk * dv) * sizeof(float));
      }
    }
  };
  for_each_value_head(hv, job);
}

void gated_delta_rule_chunked(const DeltaRuleShape& d, const DeltaRuleInputs& in, int64_t chunk, float* state,
                              float* out) {
  check(chunk > 0, "gated delta rule: chunk size must be positive, got ", chunk);
  const int64_t hv = d.value_heads, dk = d.key_head_dim, dv = d.value_head_dim;
  const int64_t group = d.value_heads / d.key_heads;
  const int64_t cmax = std::min(chunk, in.t);
  auto job = [&](int64_t h0, int64_t h1) {
    // Per-call workspace of one thread, reused by its heads and chunks.
    std::vector<float> ws(size_t(cmax * (2 * dk + dv + 2 * cmax + 2) + 2 * dv));
    float* kc = ws.data();           // [L, dk] keys of the chunk
    float* qc = kc + cmax * dk;      // [L, dk] queries
    float* u = qc + cmax * dk;       // [L, dv] the corrections written to the state ("new values")
    float* attn = u + cmax * dv;     // [L, L] decayed q·k (j <= i)
    float* ut = attn + cmax * cmax;  // [L, L] strictly lower part of the UT system
    float* gc = ut + cmax * cmax;    // [L] cumulative log decay inside the chunk
    float* bt = gc + cmax;           // [L] beta
    float* sk = bt + cmax;           // [dv] Sᵀk
    float* sq = sk + dv;             // [dv] Sᵀq
    for (int64_t h = h0; h < h1; ++h) {
      float* s = state + h * dk * dv;  // [dk, dv]
      const int64_t kh = h / group;
      for (int64_t c0 = 0; c0 < in.t; c0 += chunk) {
        const int64_t len = std::min(chunk, in.t - c0);
        float cum = 0.0f;
        for (int64_t i = 0; i < len; ++i) {
          const int64_t ti = c0 + i;
          gc[i] = cum += in.g[ti * hv + h];
          bt[i] = in.beta[ti * hv + h];
          std::memcpy(kc + i * dk, in.k + ti * in.k_stride + kh * dk, size_t(dk) * sizeof(float));
          std::memcpy(qc + i * dk, in.q + ti * in.q_stride + kh * dk, size_t(dk) * sizeof(float));
        }
        // Right-hand side from the chunk-start state S₀:
        //   u_i = β_i·(v_i − exp(gc_i)·S₀ᵀk_i),  o_i = exp(gc_i)·S₀ᵀq_i (+ the intra-chunk part below).
        for (int64_t i = 0; i < len; ++i) {
          std::fill(sk, sk + dv, 0.0f);
          std::fill(sq, sq + dv, 0.0f);
          const float* k = kc + i * dk;
          const float* q = qc + i * dk;
          for (int64_t a = 0; a < dk; ++a) {
            const float* row = s + a * dv;
            const float ka = k[a], qa = q[a];
            for (int64_t b = 0; b < dv; ++b) {
              sk[b] += ka * row[b];
              sq[b] += qa * row[b];
            }
          }
          const float e = std::exp(gc[i]);
          const float* v = in.v + (c0 + i) * in.v_stride + h * dv;
          float* ui = u + i * dv;
          float* o = out + ((c0 + i) * hv + h) * dv;
          for (int64_t b = 0; b < dv; ++b) {
            ui[b] = bt[i] * (v[b] - e * sk[b]);
            o[b] = e * sq[b];
          }
        }
        // The UT system (I + L)·U = rhs with L_ij = β_i·exp(gc_i − gc_j)·k_i·k_j (j < i),
        // and the causal decayed attention inside the chunk.
        for (int64_t i = 0; i < len; ++i) {
          const float* ki = kc + i * dk;
          const float* qi = qc + i * dk;
          for (int64_t j = 0; j <= i; ++j) {
            const float* kj = kc + j * dk;
            float kk = 0.0f, qk = 0.0f;
#pragma omp simd reduction(+ : kk, qk)
            for (int64_t a = 0; a < dk; ++a) {
              kk += ki[a] * kj[a];
              qk += qi[a] * kj[a];
            }
            const float decay = std::exp(gc[i] - gc[j]);
            ut[i * cmax + j] = bt[i] * kk * decay;
            attn[i * cmax + j] = qk * decay;
          }
        }
        // Forward substitution row by row; once u_i is final it joins the outputs of rows >= i.
        for (int64_t i = 0; i < len; ++i) {
          float* ui = u + i * dv;
          for (int64_t j = 0; j < i; ++j) {
            const float l = ut[i * cmax + j];
            const float* uj = u + j * dv;
            for (int64_t b = 0; b < dv; ++b) ui[b] -= l * uj[b];
          }
          float* o = out + ((c0 + i) * hv + h) * dv;
          for (int64_t j = 0; j <= i; ++j) {
            const float p = attn[i * cmax + j];
            const float* uj = u + j * dv;
            for (int64_t b = 0; b < dv; ++b) o[b] += p * uj[b];
          }
        }
        // S ← exp(gc_last)·S₀ + Σ_j exp(gc_last − gc_j)·k_j·u_jᵀ.
        const float last = gc[len - 1];
        const float e_last = std::exp(last);
        for (int64_t x = 0; x < dk * dv; ++x) s[x] *= e_last;
        for (int64_t j = 0; j < len; ++j) {
          const float wj = std::exp(last - gc[j]);
          const float* kj = kc + j * dk;
          const float* uj = u + j * dv;
          for (int64_t a = 0; a < dk; ++a) {
            const float c = wj * kj[a];
            float* row = s + a * dv;
            for (int64_t b = 0; b < dv; ++b) row[b] += c * uj[b];
          }
        }
      }
    }
  };
  for_each_value_head(hv, job);
}


void CpuBackend::causal_conv1d_silu_impl(const Tensor& x, const Tensor& weight, Tensor& state, Tensor& out) {
  const int64_t channels = x.dim(1);
  cpu::causal_conv1d_silu(x.data<float>(), x.dim(0), channels, channels, weight.data<float>(), weight.dim(1),
                     state.data<float>(), out.data<float>());
}

void CpuBackend::l2_norm_heads_impl(Tensor& x, int64_t first_col, int64_t heads, int64_t head_dim, float scale,
                                    float eps) {
  const int64_t cols = x.dim(1);
  for (int64_t r = 0; r < x.dim(0); ++r)
    for (int64_t h = 0; h < heads; ++h) l2_normalize(x.data<float>() + r * cols + first_col + h * head_dim, head_dim, scale, eps);
}

void CpuBackend::delta_rule_gates_impl(Tensor& b, Tensor& a, const Tensor& neg_a, const Tensor& dt_bias) {
  const int64_t hv = b.dim(1);
  for (int64_t i = 0; i < b.numel(); ++i) {
    float& beta = b.data<float>()[i];
    float& g = a.data<float>()[i];
    beta = sigmoid(beta);
    g = neg_a.data<float>()[i % hv] * softplus(g + dt_bias.data<float>()[i % hv]);
  }
}

void CpuBackend::gated_delta_rule_impl(const DeltaRuleShape& shape, const Tensor& qkv, const Tensor& g,
                                       const Tensor& beta, int64_t chunk, Tensor& state, Tensor& out,
                                       Tensor* history, int64_t history_row) {
  DeltaRuleInputs in;
  in.q = qkv.data<float>();
  in.k = in.q + shape.key_dim();
  in.v = in.q + 2 * shape.key_dim();
  in.g = g.data<float>();
  in.beta = beta.data<float>();
  in.t = qkv.dim(0);
  in.q_stride = in.k_stride = in.v_stride = qkv.dim(1);
  if (chunk > 0) {
    return cpu::gated_delta_rule_chunked(shape, in, chunk, state.data<float>(), out.data<float>());
  }
  std::vector<float*> copies;
  if (history) {
    const int64_t n = state.numel();
    for (int64_t i = 0; i < in.t; ++i) {
      const int64_t row = history_row + i;
      copies.push_back(row < history->dim(0) ? history->data<float>() + row * n : nullptr);
    }
  }
  cpu::gated_delta_rule_recurrent(shape, in, state.data<float>(), out.data<float>(), history ? copies.data() : nullptr);
}

void CpuBackend::gated_rms_norm_impl(Tensor& x, const Tensor& z, const Tensor& w, float eps) {
  const int64_t dv = x.dim(1);
  const float* wd = w.data<float>();
  for (int64_t r = 0; r < x.dim(0); ++r) {
    float* xr = x.data<float>() + r * dv;
    const float* zr = z.data<float>() + r * dv;
    float ss = 0.0f;
    for (int64_t i = 0; i < dv; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / float(dv) + eps);
    for (int64_t i = 0; i < dv; ++i) xr[i] = wd[i] * (xr[i] * inv) * silu(zr[i]);
  }
}

}  // namespace fathom::cpu
