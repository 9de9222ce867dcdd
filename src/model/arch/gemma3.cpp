// Gemma 3 text (gemma3_text, and the language model inside gemma3 folders):
// embeddings scaled by √hidden; (1 + w) RMSNorms before and after both
// sublayers; q/k norms; GELU-tanh gated MLP; attention scaled by
// query_pre_attn_scalar^-0.5; sliding layers with their own RoPE; optional
// final logit soft-capping.
#include <cmath>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/attention.h"
#include "model/decoder_model.h"
#include "model/layers.h"
#include "model/rope.h"

namespace fathom {
namespace {

struct GemmaDecoderLayer {
  // All four norms hold 1 + w, so the plain rms_norm op applies them.
  Tensor input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;
  SelfAttention attn;
  GatedMlp mlp;
};

class Gemma3Model final : public DecoderModel {
 public:
  Gemma3Model(ModelConfig config, WeightStore weights, const LoadOptions& options)
      : DecoderModel(std::move(config), std::move(weights), options),
        global_rope_(config_.rope, config_.head_dim, config_.max_position_embeddings),
        local_rope_(config_.local_rope.value_or(config_.rope), config_.head_dim, config_.max_position_embeddings) {
    const ModelConfig& c = config_;
    require_attention_layers();
    check(!c.attn_logit_softcapping, "gemma3: attn_logit_softcapping (", c.attn_logit_softcapping.value_or(0.0),
          ") is not supported by the attention op yet");
    check(c.hidden_activation == "gelu_pytorch_tanh" || c.hidden_activation == "gelu_tanh",
          "gemma3: hidden_activation \"", c.hidden_activation, "\" is not supported (gelu_pytorch_tanh is)");
    check(global_rope_.half() == local_rope_.half(), "gemma3: global and local RoPE rotate different dims");
    const WeightLoader w(weights_, dtype_, *backend_, c.quantization ? &*c.quantization : nullptr);
    const std::string root = text_prefix(w);
    embed_ = w.table(root + "embed_tokens.weight", c.vocab_size, c.hidden_size);
    // transformers multiplies by √hidden cast to the weights' (compute) dtype.
    embed_scale_ = float(std::sqrt(double(c.hidden_size)));
    if (dtype_ == ComputeDType::bf16) embed_scale_ = bf16_to_f32(f32_to_bf16(embed_scale_));
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = root + "layers." + std::to_string(i);
      GemmaDecoderLayer l;
      l.input_norm = w.one_plus_vector(p + ".input_layernorm.weight", c.hidden_size);
      l.post_attention_norm = w.one_plus_vector(p + ".post_attention_layernorm.weight", c.hidden_size);
      l.pre_feedforward_norm = w.one_plus_vector(p + ".pre_feedforward_layernorm.weight", c.hidden_size);
      l.post_feedforward_norm = w.one_plus_vector(p + ".post_feedforward_layernorm.weight", c.hidden_size);
      l.attn = SelfAttention::load(w, p + ".self_attn", c, i);  // config.qk_norm is set for gemma3_text
      l.attn.q_norm = w.one_plus_vector(p + ".self_attn.q_norm.weight", c.head_dim);
      l.attn.k_norm = w.one_plus_vector(p + ".self_attn.k_norm.weight", c.head_dim);
      l.mlp = GatedMlp::load(w, p + ".mlp", c.hidden_size, c.intermediate_size, false);
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
    Backend& b = *backend_;

    Tensor x = b.empty({t, c.hidden_size}, DType::f32);  // residual stream
    Tensor h = b.empty({t, c.hidden_size}, DType::f32);  // normed input
    Tensor s = b.empty({t, c.hidden_size}, DType::f32);  // sublayer output
    AttentionScratch scratch(b, t, c);
    Tensor gate = b.empty({t, c.intermediate_size}, DType::f32);
    Tensor up = b.empty({t, c.intermediate_size}, DType::f32);
    const RopeTable::Tables global_tables = global_rope_.tables(b, layout), local_tables = local_rope_.tables(b, layout);

    b.embedding(embed_, layout.ids, x);
    b.scale(x, embed_scale_);
    AttentionParams params;
    params.bf16_inputs = bf16;
    params.scale = float(std::pow(*c.query_pre_attn_scalar, -0.5));
    const float eps = float(c.rms_norm_eps);

    if (c.num_layers > 0) b.rms_norm(x, layers_[0].input_norm, eps, h);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const GemmaDecoderLayer& l = layers_[i];
      const bool local = c.layer_types[i] == LayerKind::sliding_attention;
      const RopeTable::Tables& rope = local ? local_tables : global_tables;
      run_self_attention(b, l.attn, c, h, rope.cos, rope.sin, params, layout, i, scratch, s, bf16);
      b.rms_norm(s, l.post_attention_norm, eps, s);
      b.add_rms_norm(x, s, l.pre_feedforward_norm, eps, h);
      l.mlp(b, h, gate, up, s, GateActivation::gelu_tanh, bf16);
      b.rms_norm(s, l.post_feedforward_norm, eps, s);
      // The residual add, and the next layer's input norm with it.
      if (i + 1 < c.num_layers) b.add_rms_norm(x, s, layers_[i + 1].input_norm, eps, h);
      else b.add_inplace(x, s);
    }

    return logits(x, layout);
  }

 private:
  RopeTable global_rope_, local_rope_;
  float embed_scale_ = 1.0f;
  std::vector<GemmaDecoderLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_gemma3(ModelConfig config, WeightStore weights, const LoadOptions& options) {
  return std::make_unique<Gemma3Model>(std::move(config), std::move(weights), options);
}

}  // namespace fathom
