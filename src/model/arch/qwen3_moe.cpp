// Qwen3-MoE: Qwen3's attention (q/k RMSNorm, GQA, RoPE) with a sparse
// mixture-of-experts MLP on the layers the config marks sparse
// (not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0) and a
// dense SwiGLU MLP of intermediate_size on the others.
#include <cmath>
#include <variant>

#include "backend/backend.h"
#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/attention.h"
#include "model/layers.h"
#include "model/moe.h"
#include "model/rope.h"

namespace fathom {
namespace {

struct MoeDecoderLayer {
  Tensor input_norm, post_attention_norm;
  SelfAttention attn;
  std::variant<GatedMlp, SparseMoe> mlp;
};

class Qwen3MoeModel final : public Model {
 public:
  Qwen3MoeModel(ModelConfig config, WeightStore weights, const LoadOptions& options)
      : Model(options.kv_scheme),
        config_(std::move(config)),
        weights_(std::move(weights)),
        dtype_(options.dtype),
        backend_(make_cpu_backend()),
        rope_(config_.rope, config_.head_dim, config_.max_position_embeddings) {
    const ModelConfig& c = config_;
    options.kv_scheme.validate_for(c);
    check(c.num_experts > 0, "model_type qwen3_moe: config.json has no experts (num_experts / num_local_experts)");
    const WeightLoader w(weights_, dtype_);
    embed_ = w.table("model.embed_tokens.weight", c.vocab_size, c.hidden_size);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      check(c.layer_types[i] != LayerKind::linear_attention, "model_type qwen3_moe: layer ", i,
            " is linear_attention, which this architecture does not have");
      const std::string p = "model.layers." + std::to_string(i);
      MoeDecoderLayer l;
      l.input_norm = w.vector(p + ".input_layernorm.weight", c.hidden_size);
      l.post_attention_norm = w.vector(p + ".post_attention_layernorm.weight", c.hidden_size);
      l.attn = SelfAttention::load(w, p + ".self_attn", c, i);
      if (c.is_sparse_moe_layer(i)) l.mlp = SparseMoe::load(w, p + ".mlp", c);
      else l.mlp = GatedMlp::load(w, p + ".mlp", c.hidden_size, c.intermediate_size, false);
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector("model.norm.weight", c.hidden_size);
    const bool tied = c.tie_word_embeddings || !w.has("lm_head.weight");
    lm_head_ = w.matmul_weight(tied ? "model.embed_tokens.weight" : "lm_head.weight", c.vocab_size, c.hidden_size);
    weight_bytes_ = weights_.total_bytes() + w.converted_bytes();
  }

  const ModelConfig& config() const override { return config_; }
  ComputeDType compute_dtype() const override { return dtype_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  std::string backend_name() const override { return backend_->name(); }
  std::unique_ptr<SequenceState> new_state(int64_t capacity) const override { return make_state(config_, capacity); }

  Tensor forward(const std::vector<int32_t>& ids, SequenceState& state, bool all_logits) const override {
    const ModelConfig& c = config_;
    const int64_t t = int64_t(ids.size());
    check(t > 0, "forward: no tokens");
    check(int64_t(state.kv.size()) == c.num_layers, "forward: state has ", state.kv.size(), " layers, model ",
          c.num_layers);
    const int64_t first = state.length();
    check(first + t <= state.capacity(), "forward: ", first, " + ", t, " tokens exceed the sequence capacity of ",
          state.capacity());
    const bool bf16 = dtype_ == ComputeDType::bf16;
    Backend& b = *backend_;

    Tensor x = Tensor::empty({t, c.hidden_size}, DType::f32);  // residual stream
    Tensor h = Tensor::empty({t, c.hidden_size}, DType::f32);  // normed input / sublayer output
    AttentionScratch scratch(t, c);
    Tensor gate = Tensor::empty({t, c.intermediate_size}, DType::f32);  // dense layers only
    Tensor up = Tensor::empty({t, c.intermediate_size}, DType::f32);
    Tensor cos = Tensor::empty({t, rope_.half()}, DType::f32);
    Tensor sin = Tensor::empty({t, rope_.half()}, DType::f32);

    b.embedding(embed_, ids, x);
    rope_.fill(first, t, cos, sin);
    AttentionParams params;
    params.scale = float(1.0 / std::sqrt(double(c.head_dim)));
    params.first_position = first;

    for (int64_t i = 0; i < c.num_layers; ++i) {
      const MoeDecoderLayer& l = layers_[i];
      b.rms_norm(x, l.input_norm, float(c.rms_norm_eps), h);
      run_self_attention(b, l.attn, c, h, cos, sin, params, *state.kv[i], scratch, h, bf16);
      b.add_inplace(x, h);

      b.rms_norm(x, l.post_attention_norm, float(c.rms_norm_eps), h);
      if (const auto* moe = std::get_if<SparseMoe>(&l.mlp)) {
        Tensor out = Tensor::empty({t, c.hidden_size}, DType::f32);
        (*moe)(b, h, out, bf16);
        b.add_inplace(x, out);
      } else {
        std::get<GatedMlp>(l.mlp)(b, h, gate, up, h, GateActivation::silu, bf16);
        b.add_inplace(x, h);
      }
    }

    state.end_step();

    const Tensor last = all_logits ? x : x.slice_rows(t - 1, t);
    Tensor normed = Tensor::empty(last.shape(), DType::f32);
    b.rms_norm(last, final_norm_, float(c.rms_norm_eps), normed);
    Tensor logits = Tensor::empty({last.dim(0), c.vocab_size}, DType::f32);
    b.matmul(normed, lm_head_, nullptr, logits, bf16);
    return logits;
  }

 private:
  ModelConfig config_;
  WeightStore weights_;
  ComputeDType dtype_;
  std::unique_ptr<Backend> backend_;
  RopeTable rope_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<MoeDecoderLayer> layers_;
  int64_t weight_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_qwen3_moe(ModelConfig config, WeightStore weights, const LoadOptions& options) {
  return std::make_unique<Qwen3MoeModel>(std::move(config), std::move(weights), options);
}

}  // namespace fathom
