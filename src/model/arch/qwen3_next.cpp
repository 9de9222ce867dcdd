// Qwen3-Next (qwen3_next) and Qwen3.5 text (qwen3_5_text, and the language
// model inside qwen3_5 folders): hybrid decoders whose layers are either
// Gated DeltaNet (linear_attention, model/gated_deltanet.h) or gated full
// attention, where q_proj also emits a per-head output gate: o(attn · sigmoid(gate)).
// q/k norms, partial rotary RoPE, (1 + w) RMSNorms around each sublayer, and a
// SwiGLU MLP or (Qwen3-Next) a sparse MoE with a gated shared expert.
// Qwen3.5's M-RoPE gives text tokens the same position on all three axes,
// which makes it the plain RoPE used here.
#include <cmath>
#include <variant>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/attention.h"
#include "model/decoder_model.h"
#include "model/gated_deltanet.h"
#include "model/layers.h"
#include "model/moe.h"
#include "model/rope.h"

namespace fathom {
namespace {

// Full attention whose q_proj emits [query | gate] per head.
struct GatedAttention {
  Linear q_gate, k, v, o;
  Tensor q_norm, k_norm;  // [head_dim], 1 + w

  static GatedAttention load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
    const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
    GatedAttention a;
    a.q_gate = Linear::load(w, prefix + ".q_proj", 2 * q_dim, c.hidden_size, c.qkv_bias);
    a.k = Linear::load(w, prefix + ".k_proj", kv_dim, c.hidden_size, c.qkv_bias);
    a.v = Linear::load(w, prefix + ".v_proj", kv_dim, c.hidden_size, c.qkv_bias);
    a.o = Linear::load(w, prefix + ".o_proj", c.hidden_size, q_dim, c.o_bias);
    a.q_norm = w.one_plus_vector(prefix + ".q_norm.weight", c.head_dim);
    a.k_norm = w.one_plus_vector(prefix + ".k_norm.weight", c.head_dim);
    return a;
  }
};

struct GatedAttentionScratch {
  AttentionScratch base;
  Tensor q_gate;  // [t, heads, 2 · head_dim]
  Tensor gate;    // [t, heads · head_dim]
  GatedAttentionScratch(Backend& b, int64_t t, const ModelConfig& c)
      : base(b, t, c),
        q_gate(b.empty({t, c.num_heads, 2 * c.head_dim}, DType::f32)),
        gate(b.empty({t, c.num_heads * c.head_dim}, DType::f32)) {}
};

// out [t, hidden] ← o(attention(rope(q_norm(q)), rope(k_norm(k)), v) · sigmoid(gate)).
void run_gated_attention(Backend& b, const GatedAttention& a, const ModelConfig& c, const Tensor& h,
                         const Tensor& cos, const Tensor& sin, const AttentionParams& params,
                         const StepLayout& layout, int64_t layer, GatedAttentionScratch& s, Tensor& out, bool bf16) {
  const int64_t t = h.dim(0), hd = c.head_dim, heads = c.num_heads;
  const int64_t q_dim = heads * hd, kv_dim = c.num_kv_heads * hd;
  Tensor qg2 = s.q_gate.reshape({t, 2 * q_dim});
  Tensor k2 = s.base.k.reshape({t, kv_dim}), v2 = s.base.v.reshape({t, kv_dim});
  const Backend::MatmulTarget qkv[] = {{&a.q_gate.weight, a.q_gate.bias ? &*a.q_gate.bias : nullptr, &qg2},
                                       {&a.k.weight, a.k.bias ? &*a.k.bias : nullptr, &k2},
                                       {&a.v.weight, a.v.bias ? &*a.v.bias : nullptr, &v2}};
  b.matmul_shared(h, qkv, bf16);
  const Tensor per_head = s.q_gate.reshape({t * heads, 2 * hd});  // [query | gate] per head
  Tensor q_rows = s.base.q.reshape({t * heads, hd}), gate_rows = s.gate.reshape({t * heads, hd});
  b.copy_columns(per_head, 0, q_rows, 0, hd);
  b.copy_columns(per_head, hd, gate_rows, 0, hd);
  const QkRope rope{&cos, &sin, {&a.q_norm, &a.k_norm, float(c.rms_norm_eps)}};
  attend_segments(b, layout, layer, &s.base.k, &s.base.v, s.base.q, params, s.base.attn, &rope);
  b.sigmoid_mul(s.base.attn, s.gate);
  a.o(b, s.base.attn.reshape({t, q_dim}), out, bf16);
}

struct QwenNextLayer {
  Tensor input_norm, post_attention_norm;  // 1 + w
  std::variant<GatedDeltaNet, GatedAttention> mixer;
  std::variant<GatedMlp, SparseMoe> mlp;
};

class Qwen3NextModel final : public DecoderModel {
 public:
  Qwen3NextModel(ModelConfig config, WeightStore weights, const LoadOptions& options)
      : DecoderModel(std::move(config), std::move(weights), options),
        rope_(config_.rope, config_.head_dim, config_.max_position_embeddings) {
    const ModelConfig& c = config_;
    check(c.linear_attention.has_value(), "model_type ", c.model_type, ": config.json has no linear attention sizes");
    check(c.hidden_activation == "silu", "model_type ", c.model_type, ": hidden_act \"", c.hidden_activation,
          "\" is not supported (silu is)");
    const WeightLoader w(weights_, dtype_, *backend_, c.quantization ? &*c.quantization : nullptr);
    const std::string root = text_prefix(w);
    embed_ = w.table(root + "embed_tokens.weight", c.vocab_size, c.hidden_size);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = root + "layers." + std::to_string(i);
      const LayerKind kind = c.layer_types[size_t(i)];
      check(kind != LayerKind::sliding_attention, "model_type ", c.model_type, ": layer ", i,
            " is sliding_attention, which this architecture does not have");
      QwenNextLayer l{w.one_plus_vector(p + ".input_layernorm.weight", c.hidden_size),
                      w.one_plus_vector(p + ".post_attention_layernorm.weight", c.hidden_size),
                      GatedDeltaNet{}, GatedMlp{}};
      if (kind == LayerKind::linear_attention) l.mixer = GatedDeltaNet::load(w, p + ".linear_attn", c);
      else l.mixer = GatedAttention::load(w, p + ".self_attn", c);
      if (c.is_sparse_moe_layer(i)) l.mlp = SparseMoe::load(w, p + ".mlp", c);
      else l.mlp = GatedMlp::load(w, p + ".mlp", c.hidden_size, c.intermediate_size, false);
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.one_plus_vector(root + "norm.weight", c.hidden_size);
    load_lm_head(w, root);
    count_weight_bytes(w);
  }

  StepOutput forward_step(const StepLayout& layout) const override {
    const ModelConfig& c = config_;
    const int64_t t = layout.rows();
    const bool bf16 = this->bf16();
    const float eps = float(c.rms_norm_eps);
    Backend& b = *backend_;

    Tensor x = b.empty({t, c.hidden_size}, DType::f32);  // residual stream
    Tensor h = b.empty({t, c.hidden_size}, DType::f32);  // normed input
    Tensor s = b.empty({t, c.hidden_size}, DType::f32);  // sublayer output
    GatedAttentionScratch attn_scratch(b, t, c);
    // The recurrence runs per sequence, on its own rows (and scratch of that many rows).
    std::vector<GatedDeltaNetScratch> delta_scratch;
    for (const auto& segment : layout.segments)
      delta_scratch.emplace_back(b, segment.rows, *c.linear_attention);
    Tensor gate = b.empty({t, c.intermediate_size}, DType::f32);  // dense MLPs
    Tensor up = b.empty({t, c.intermediate_size}, DType::f32);
    const auto [cos, sin] = rope_.tables(b, layout);

    b.embedding(embed_, layout.ids, x);
    AttentionParams params;
    params.bf16_inputs = bf16;
    params.scale = float(1.0 / std::sqrt(double(c.head_dim)));

    if (c.num_layers > 0) b.rms_norm(x, layers_[0].input_norm, eps, h);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const QwenNextLayer& l = layers_[size_t(i)];
      if (const auto* net = std::get_if<GatedDeltaNet>(&l.mixer)) {
        for (size_t j = 0; j < layout.segments.size(); ++j) {
          const auto& segment = layout.segments[j];
          Tensor out = s.slice_rows(segment.row, segment.row + segment.rows);
          run_gated_deltanet(b, *net, h.slice_rows(segment.row, segment.row + segment.rows),
                             *segment.state->recurrent[size_t(i)], delta_scratch[j], out, bf16);
        }
      } else {
        run_gated_attention(b, std::get<GatedAttention>(l.mixer), c, h, cos, sin, params, layout, i, attn_scratch, s,
                            bf16);
      }
      b.add_rms_norm(x, s, l.post_attention_norm, eps, h);
      if (const auto* moe = std::get_if<SparseMoe>(&l.mlp)) (*moe)(b, h, s, bf16);
      else std::get<GatedMlp>(l.mlp)(b, h, gate, up, s, GateActivation::silu, bf16);
      // The residual add, and the next layer's input norm with it.
      if (i + 1 < c.num_layers) b.add_rms_norm(x, s, layers_[size_t(i + 1)].input_norm, eps, h);
      else b.add_inplace(x, s);
    }

    return logits(x, layout);
  }

 private:
  RopeTable rope_;
  std::vector<QwenNextLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3_next(ModelConfig config, WeightStore weights, const LoadOptions& options) {
  return std::make_unique<Qwen3NextModel>(std::move(config), std::move(weights), options);
}

}  // namespace fathom
