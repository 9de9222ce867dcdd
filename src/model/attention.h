#pragma once
// The self-attention sublayer shared by the decoder families: q/k/v
// projections, optional per-head q/k RMSNorm, RoPE, the layer's KV state, and
// the output projection.
#include <optional>
#include <string>

#include "backend/backend.h"
#include "io/model_config.h"
#include "kv/kv_layer.h"
#include "model/layers.h"
#include "model/weights.h"

namespace fathom {

struct SelfAttention {
  Linear q, k, v, o;
  std::optional<Tensor> q_norm, k_norm;  // [head_dim], when config.qk_norm
  std::optional<int64_t> window;         // sliding_attention layers

  // Weights under `prefix` (e.g. "model.layers.3.self_attn"); biases and q/k
  // norms as the config says, the window from layer_types[layer].
  static SelfAttention load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c, int64_t layer);
};

// One chunk's attention activations, reused by every layer.
struct AttentionScratch {
  Tensor q;     // [t, heads, head_dim]
  Tensor k, v;  // [t, kv_heads, head_dim]
  Tensor attn;  // [t, heads, head_dim]
  AttentionScratch(int64_t t, const ModelConfig& c);
};

// out [t, hidden] ← o(attention(rope(q(h)), rope(k(h)), v(h))); appends this
// chunk's keys/values to `kv`. cos/sin [t, rotary_dim / 2]; params carries the
// scale and the first position (the window comes from the layer).
void run_self_attention(Backend& b, const SelfAttention& a, const ModelConfig& c, const Tensor& h, const Tensor& cos,
                        const Tensor& sin, AttentionParams params, KvLayer& kv, AttentionScratch& s, Tensor& out,
                        bool bf16);

}  // namespace fathom
