#include "model/decoder_model.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

DecoderModel::DecoderModel(ModelConfig config, WeightStore weights, const LoadOptions& options)
    : Model(options),
      config_(std::move(config)),
      weights_(std::move(weights)),
      dtype_(options.dtype) {
  options.kv_scheme.validate_for(config_);
}

void DecoderModel::require_attention_layers() const {
  for (int64_t i = 0; i < config_.num_layers; ++i)
    check(config_.layer_types[i] != LayerKind::linear_attention, "model_type ", config_.model_type, ": layer ", i,
          " is linear_attention, which this architecture does not have");
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

Tensor DecoderModel::logits(const Tensor& x, const StepLayout& layout) const {
  Backend& b = *backend_;
  const int64_t n = int64_t(layout.logit_rows.size()), hidden = x.dim(1);
  if (n == 0) return Tensor::empty({0, config_.vocab_size}, DType::f32);
  Tensor rows = x;  // every row, in order
  if (n != x.dim(0)) {
    rows = b.empty({n, hidden}, DType::f32);
    b.gather_rows(x, std::vector<int32_t>(layout.logit_rows.begin(), layout.logit_rows.end()), rows);
  }
  Tensor out = b.empty({n, config_.vocab_size}, DType::f32);
  Tensor normed = b.empty(rows.shape(), DType::f32);
  b.rms_norm(rows, final_norm_, float(config_.rms_norm_eps), normed);
  b.matmul(normed, lm_head_, nullptr, out, bf16());
  if (config_.final_logit_softcapping) b.soft_cap(out, float(*config_.final_logit_softcapping));
  return b.download(out);
}

}  // namespace fathom
