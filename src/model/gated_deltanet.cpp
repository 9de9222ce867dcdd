#include "model/gated_deltanet.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace fathom {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }
// PyTorch's softplus (beta 1, threshold 20): linear above the threshold.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x ← x / sqrt(Σx² + 1e-6), the FLA-compatible L2 norm transformers applies to q and k.
void l2_normalize(float* x, int64_t n, float extra_scale) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = extra_scale / std::sqrt(ss + 1e-6f);
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

void gated_delta_rule_recurrent(const DeltaNetDims& d, const DeltaRuleInputs& in, float* state, float* out,
                                float* const* copies) {
  const int64_t hv = d.num_value_heads, dk = d.key_head_dim, dv = d.value_head_dim;
  const int64_t group = d.num_value_heads / d.num_key_heads;
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

void gated_delta_rule_chunked(const DeltaNetDims& d, const DeltaRuleInputs& in, int64_t chunk, float* state,
                              float* out) {
  check(chunk > 0, "gated delta rule: chunk size must be positive, got ", chunk);
  const int64_t hv = d.num_value_heads, dk = d.key_head_dim, dv = d.value_head_dim;
  const int64_t group = d.num_value_heads / d.num_key_heads;
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

GatedDeltaNet GatedDeltaNet::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  check(c.linear_attention.has_value(), "gated deltanet: ", prefix, ": config has no linear attention sizes");
  GatedDeltaNet n;
  n.dims = *c.linear_attention;
  n.eps = float(c.rms_norm_eps);
  const DeltaNetDims& d = n.dims;
  const int64_t hidden = c.hidden_size;
  if (w.has(prefix + ".in_proj_qkvz.weight")) {
    n.in_qkvz = Linear::load(w, prefix + ".in_proj_qkvz", 2 * d.key_dim() + 2 * d.value_dim(), hidden, false);
    n.in_ba = Linear{w.f32_matrix(prefix + ".in_proj_ba.weight", 2 * d.num_value_heads, hidden), std::nullopt};
  } else {
    n.in_qkv = Linear::load(w, prefix + ".in_proj_qkv", d.conv_dim(), hidden, false);
    n.in_z = Linear::load(w, prefix + ".in_proj_z", d.value_dim(), hidden, false);
    n.in_b = Linear{w.f32_matrix(prefix + ".in_proj_b.weight", d.num_value_heads, hidden), std::nullopt};
    n.in_a = Linear{w.f32_matrix(prefix + ".in_proj_a.weight", d.num_value_heads, hidden), std::nullopt};
  }
  // Conv1d weights are stored [conv_dim, 1, kernel]; the conv runs in f32.
  n.conv_weight = convert_tensor(w.matmul_weight_stack(prefix + ".conv1d.weight", d.conv_dim(), 1, d.conv_kernel),
                                 DType::f32);
  const Tensor a_log = w.vector(prefix + ".A_log", d.num_value_heads);
  n.neg_a = Tensor::empty({d.num_value_heads}, DType::f32);
  for (int64_t h = 0; h < d.num_value_heads; ++h) n.neg_a.data<float>()[h] = -std::exp(a_log.data<float>()[h]);
  n.dt_bias = w.vector(prefix + ".dt_bias", d.num_value_heads);
  n.norm = w.vector(prefix + ".norm.weight", d.value_head_dim);
  n.out = Linear::load(w, prefix + ".out_proj", hidden, d.value_dim(), false);
  return n;
}

GatedDeltaNetScratch::GatedDeltaNetScratch(int64_t t, const DeltaNetDims& d, bool fused)
    : qkv(Tensor::empty({t, d.conv_dim()}, DType::f32)),
      conv(Tensor::empty({t, d.conv_dim()}, DType::f32)),
      z(Tensor::empty({t, d.value_dim()}, DType::f32)),
      b(Tensor::empty({t, d.num_value_heads}, DType::f32)),
      a(Tensor::empty({t, d.num_value_heads}, DType::f32)),
      core(Tensor::empty({t, d.value_dim()}, DType::f32)) {
  if (fused) {
    fused_qkvz = Tensor::empty({t, 2 * d.key_dim() + 2 * d.value_dim()}, DType::f32);
    fused_ba = Tensor::empty({t, 2 * d.num_value_heads}, DType::f32);
  }
}

namespace {

// Qwen3-Next's fused projections hold, per key head, [q | k | v | z] and
// [b | a] (v, z, b, a for that head's group of value heads); regroup them
// into q|k|v (the conv's channel order), z, b and a.
void split_fused_projections(const DeltaNetDims& d, GatedDeltaNetScratch& s, int64_t t) {
  const int64_t dk = d.key_head_dim, group = d.num_value_heads / d.num_key_heads, gv = group * d.value_head_dim;
  const int64_t qkvz_row = 2 * d.key_dim() + 2 * d.value_dim(), ba_row = 2 * d.num_value_heads;
  const size_t f = sizeof(float);
  for (int64_t ti = 0; ti < t; ++ti) {
    const float* src = s.fused_qkvz.data<float>() + ti * qkvz_row;
    const float* ba = s.fused_ba.data<float>() + ti * ba_row;
    float* qkv = s.qkv.data<float>() + ti * d.conv_dim();
    float* z = s.z.data<float>() + ti * d.value_dim();
    for (int64_t g = 0; g < d.num_key_heads; ++g) {
      const float* p = src + g * (2 * dk + 2 * gv);
      std::memcpy(qkv + g * dk, p, size_t(dk) * f);
      std::memcpy(qkv + d.key_dim() + g * dk, p + dk, size_t(dk) * f);
      std::memcpy(qkv + 2 * d.key_dim() + g * gv, p + 2 * dk, size_t(gv) * f);
      std::memcpy(z + g * gv, p + 2 * dk + gv, size_t(gv) * f);
      std::memcpy(s.b.data<float>() + ti * d.num_value_heads + g * group, ba + g * 2 * group, size_t(group) * f);
      std::memcpy(s.a.data<float>() + ti * d.num_value_heads + g * group, ba + g * 2 * group + group,
                  size_t(group) * f);
    }
  }
}

}  // namespace

void run_gated_deltanet(Backend& b, const GatedDeltaNet& net, const Tensor& h, RecurrentState& state,
                        GatedDeltaNetScratch& s, Tensor& out, bool bf16) {
  const DeltaNetDims& d = net.dims;
  const int64_t t = h.dim(0), hv = d.num_value_heads, dk = d.key_head_dim, dv = d.value_head_dim;
  check(s.qkv.dim(0) == t && out.dim(0) == t, "gated deltanet: scratch of ", s.qkv.dim(0), " rows for ", t,
        " tokens");
  check(state.conv.dim(0) == d.conv_dim() && state.matrix.dim(0) == hv, "gated deltanet: state ",
        state.matrix.shape_string(), " does not fit the layer");

  if (net.in_qkvz) {
    b.matmul(h, net.in_qkvz->weight, nullptr, s.fused_qkvz, bf16);
    b.matmul(h, net.in_ba->weight, nullptr, s.fused_ba, false);
    split_fused_projections(d, s, t);
  } else {
    const Backend::MatmulTarget proj[] = {{&net.in_qkv.weight, nullptr, &s.qkv}, {&net.in_z.weight, nullptr, &s.z}};
    b.matmul_shared(h, proj, bf16);
    const Backend::MatmulTarget decay[] = {{&net.in_b.weight, nullptr, &s.b}, {&net.in_a.weight, nullptr, &s.a}};
    b.matmul_shared(h, decay, false);
  }

  if (state.in_step()) state.record_conv_inputs(s.qkv.data<float>(), t, d.conv_dim());
  causal_conv1d_silu(s.qkv.data<float>(), t, d.conv_dim(), d.conv_dim(), net.conv_weight.data<float>(),
                     d.conv_kernel, state.conv.data<float>(), s.conv.data<float>());

  // q and k: unit L2 norm per head; q also carries the key_head_dim^-0.5 scale.
  const float q_scale = 1.0f / std::sqrt(float(dk));
  for (int64_t ti = 0; ti < t; ++ti) {
    float* row = s.conv.data<float>() + ti * d.conv_dim();
    for (int64_t kh = 0; kh < d.num_key_heads; ++kh) {
      l2_normalize(row + kh * dk, dk, q_scale);
      l2_normalize(row + d.key_dim() + kh * dk, dk, 1.0f);
    }
  }
  // beta = sigmoid(b); g = −exp(A_log)·softplus(a + dt_bias), both in place.
  for (int64_t ti = 0; ti < t; ++ti)
    for (int64_t x = 0; x < hv; ++x) {
      float& beta = s.b.data<float>()[ti * hv + x];
      float& g = s.a.data<float>()[ti * hv + x];
      beta = sigmoid(beta);
      g = net.neg_a.data<float>()[x] * softplus(g + net.dt_bias.data<float>()[x]);
    }

  DeltaRuleInputs in;
  in.q = s.conv.data<float>();
  in.k = in.q + d.key_dim();
  in.v = in.q + 2 * d.key_dim();
  in.g = s.a.data<float>();
  in.beta = s.b.data<float>();
  in.t = t;
  in.q_stride = in.k_stride = in.v_stride = d.conv_dim();
  if (state.in_step()) {
    // A speculative step keeps the matrix after each position, so it runs token
    // by token: the states (and outputs) are decode's, bit for bit.
    const int64_t p = state.step_written();
    std::vector<float*> copies(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) copies[size_t(i)] = state.copy_after(p + 1 + i);
    gated_delta_rule_recurrent(d, in, state.matrix.data<float>(), s.core.data<float>(), copies.data());
  } else if (t == 1) {
    gated_delta_rule_recurrent(d, in, state.matrix.data<float>(), s.core.data<float>());
  } else {
    gated_delta_rule_chunked(d, in, kDeltaRuleChunk, state.matrix.data<float>(), s.core.data<float>());
  }
  state.length += t;

  // Gated RMSNorm per (token, value head): w · x / rms(x) · silu(z).
  const float* w = net.norm.data<float>();
  for (int64_t r = 0; r < t * hv; ++r) {
    float* x = s.core.data<float>() + r * dv;
    const float* z = s.z.data<float>() + r * dv;
    float ss = 0.0f;
    for (int64_t i = 0; i < dv; ++i) ss += x[i] * x[i];
    const float inv = 1.0f / std::sqrt(ss / float(dv) + net.eps);
    for (int64_t i = 0; i < dv; ++i) x[i] = w[i] * (x[i] * inv) * silu(z[i]);
  }
  net.out(b, s.core, out, bf16);
}

}  // namespace fathom
