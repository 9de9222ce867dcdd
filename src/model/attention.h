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
#include "model/step.h"
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
  AttentionScratch(Backend& b, int64_t t, const ModelConfig& c);
};

// For each sequence of the step: appends its rows of k and v (when k is not
// null) to its state's KV layer `kv_layer`, then attends its rows of q over
// that layer from its own first position. q, k, v, out: [rows, heads, head_dim].
// With `rope`, q and k are turned first (Backend::rope_kv_write, with the
// write), q's rows in place.
struct QkRope {
  const Tensor* cos;
  const Tensor* sin;
  Backend::QkNorms norms;
};
void attend_segments(Backend& b, const StepLayout& layout, int64_t kv_layer, Tensor* k, const Tensor* v, Tensor& q,
                     AttentionParams params, Tensor& out, const QkRope* rope = nullptr);

// out [t, hidden] ← o(attention(rope(q(h)), rope(k(h)), v(h))) over the step's
// rows; each sequence appends its keys/values to its KV layer `layer`.
// cos/sin [t, rotary_dim / 2] at each row's position; params carries the
// scale (positions come from the layout, the window from the layer).
void run_self_attention(Backend& b, const SelfAttention& a, const ModelConfig& c, const Tensor& h, const Tensor& cos,
                        const Tensor& sin, AttentionParams params, const StepLayout& layout, int64_t layer,
                        AttentionScratch& s, Tensor& out, bool bf16);

}  // namespace fathom
