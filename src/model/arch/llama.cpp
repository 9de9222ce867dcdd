// The Llama family: Llama, Mistral, Qwen2 (q/k/v bias), Qwen3 (q/k RMSNorm)
// and Qwen3-MoE (sparse top-k experts on the layers the config marks sparse).
// Pre-norm decoder layers: x += o(attn(rope(q(n(x))), rope(k(n(x))), v(n(x))));
// x += mlp(n(x)), a SwiGLU down(silu(gate) * up) or a mixture of them.
#include <cmath>
#include <variant>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/attention.h"
#include "model/decoder_model.h"
#include "model/layers.h"
#include "model/moe.h"
#include "model/rope.h"

namespace fathom {
namespace {

struct DecoderLayer {
  Tensor input_norm, post_attention_norm;
  SelfAttention attn;
  std::variant<GatedMlp, SparseMoe> mlp;
};

class LlamaFamilyModel final : public DecoderModel {
 public:
  LlamaFamilyModel(ModelConfig config, WeightStore weights, const LoadOptions& options)
      : DecoderModel(std::move(config), std::move(weights), options),
        rope_(config_.rope, config_.head_dim, config_.max_position_embeddings) {
    const ModelConfig& c = config_;
    require_attention_layers();
    check(c.model_type != "qwen3_moe" || c.num_experts > 0,
          "model_type qwen3_moe: config.json has no experts (num_experts / num_local_experts)");
    const WeightLoader w(weights_, dtype_, *backend_, c.quantization ? &*c.quantization : nullptr);
    embed_ = w.table("model.embed_tokens.weight", c.vocab_size, c.hidden_size);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i);
      DecoderLayer l;
      l.input_norm = w.vector(p + ".input_layernorm.weight", c.hidden_size);
      l.post_attention_norm = w.vector(p + ".post_attention_layernorm.weight", c.hidden_size);
      l.attn = SelfAttention::load(w, p + ".self_attn", c, i);
      if (c.is_sparse_moe_layer(i)) l.mlp = SparseMoe::load(w, p + ".mlp", c);
      else l.mlp = GatedMlp::load(w, p + ".mlp", c.hidden_size, c.intermediate_size, c.mlp_bias);
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector("model.norm.weight", c.hidden_size);
    load_lm_head(w, "model.");
    count_weight_bytes(w);
  }

  StepOutput forward_step(const StepLayout& layout) const override {
    const ModelConfig& c = config_;
    const int64_t t = layout.rows();
    Backend& b = *backend_;

    // Activations for this chunk; reused by every layer.
    Tensor x = b.empty({t, c.hidden_size}, DType::f32);  // residual stream
    Tensor h = b.empty({t, c.hidden_size}, DType::f32);  // normed input / sublayer output
    AttentionScratch scratch(b, t, c);
    Tensor gate = b.empty({t, c.intermediate_size}, DType::f32);  // dense MLPs
    Tensor up = b.empty({t, c.intermediate_size}, DType::f32);
    const auto [cos, sin] = rope_.tables(b, layout);

    b.embedding(embed_, layout.ids, x);
    AttentionParams params;
    params.bf16_inputs = bf16();
    params.scale = float(1.0 / std::sqrt(double(c.head_dim)));

    const float eps = float(c.rms_norm_eps);
    if (c.num_layers > 0) b.rms_norm(x, layers_[0].input_norm, eps, h);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const DecoderLayer& l = layers_[i];
      run_self_attention(b, l.attn, c, h, cos, sin, params, layout, i, scratch, h, bf16());
      b.add_rms_norm(x, h, l.post_attention_norm, eps, h);
      Tensor out = h;  // the MLP's output
      if (const auto* moe = std::get_if<SparseMoe>(&l.mlp)) {
        out = b.empty({t, c.hidden_size}, DType::f32);
        (*moe)(b, h, out, bf16());
      } else {
        std::get<GatedMlp>(l.mlp)(b, h, gate, up, h, GateActivation::silu, bf16());
      }
      // The residual add, and the next layer's input norm with it.
      if (i + 1 < c.num_layers) b.add_rms_norm(x, out, layers_[i + 1].input_norm, eps, h);
      else b.add_inplace(x, out);
    }

    return logits(x, layout);
  }

 private:
  RopeTable rope_;
  std::vector<DecoderLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_llama_family(ModelConfig config, WeightStore weights, const LoadOptions& options) {
  return std::make_unique<LlamaFamilyModel>(std::move(config), std::move(weights), options);
}

}  // namespace fathom
