#include "model/decoder_model.h"

#include "core/error.h"

namespace fathom {

DecoderModel::DecoderModel(ModelConfig config, WeightStore weights, const LoadOptions& options)
    : Model(options),
      config_(std::move(config)),
      weights_(std::move(weights)),
      dtype_(options.dtype),
      backend_(make_cpu_backend()) {
  options.kv_scheme.validate_for(config_);
}

void DecoderModel::require_attention_layers() const {
  for (int64_t i = 0; i < config_.num_layers; ++i)
    check(config_.layer_types[i] != LayerKind::linear_attention, "model_type ", config_.model_type, ": layer ", i,
          " is linear_attention, which this architecture does not have");
}

int64_t DecoderModel::begin_step(const SequenceState& state, int64_t t) const {
  check(t > 0, "forward: no tokens");
  check(state.valid(), "forward: the sequence was invalidated by a failed speculative step");
  check(int64_t(state.kv.size()) == config_.num_layers && int64_t(state.recurrent.size()) == config_.num_layers,
        "forward: state has ", state.kv.size(), " layers, model ", config_.num_layers);
  check(t <= state.max_step, "forward: a step of ", t, " tokens is longer than the state's ", state.max_step);
  const int64_t first = state.length();
  check(first + t <= state.capacity, "forward: ", first, " + ", t, " tokens exceed the sequence capacity of ",
        state.capacity);
  return first;
}

std::string DecoderModel::text_prefix(const WeightLoader& w) const {
  for (const char* p : {"model.", "model.language_model.", "language_model.model."})
    if (w.has(std::string(p) + "embed_tokens.weight")) return p;
  fail(config_.model_type, ": no embed_tokens.weight under model., model.language_model. or language_model.model.");
}

void DecoderModel::load_lm_head(const WeightLoader& w, const std::string& root) {
  std::string head = root + "embed_tokens.weight";
  if (!config_.tie_word_embeddings)
    for (const char* name : {"lm_head.weight", "language_model.lm_head.weight"})
      if (w.has(name)) {
        head = name;
        break;
      }
  lm_head_ = w.matmul_weight(head, config_.vocab_size, config_.hidden_size);
}

Tensor DecoderModel::logits(const Tensor& x, bool all_logits) const {
  const Tensor rows = all_logits ? x : x.slice_rows(x.dim(0) - 1, x.dim(0));
  Tensor normed = Tensor::empty(rows.shape(), DType::f32);
  backend_->rms_norm(rows, final_norm_, float(config_.rms_norm_eps), normed);
  Tensor out = Tensor::empty({rows.dim(0), config_.vocab_size}, DType::f32);
  backend_->matmul(normed, lm_head_, nullptr, out, bf16());
  return out;
}

}  // namespace fathom
