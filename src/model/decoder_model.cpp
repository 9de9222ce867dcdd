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

StepOutput DecoderModel::logits(const Tensor& x, const StepLayout& layout) const {
  Backend& b = *backend_;
  const int64_t whole = int64_t(layout.logit_rows.size()), picked = int64_t(layout.pick_rows.size());
  const int64_t n = whole + picked, hidden = x.dim(1), vocab = config_.vocab_size;
  StepOutput result{Tensor::empty({whole, vocab}, DType::f32), Tensor::empty({picked}, DType::i32)};
  if (n == 0) return result;
  // The rows wanted whole, then the picked ones: x as it is when that is
  // every row in order.
  std::vector<int32_t> wanted(layout.logit_rows.begin(), layout.logit_rows.end());
  wanted.insert(wanted.end(), layout.pick_rows.begin(), layout.pick_rows.end());
  bool in_order = n == x.dim(0);
  for (int64_t i = 0; in_order && i < n; ++i) in_order = wanted[size_t(i)] == i;
  Tensor rows = x;
  if (!in_order) {
    rows = b.empty({n, hidden}, DType::f32);
    b.gather_rows(x, wanted, rows);
  }
  Tensor out = b.empty({n, vocab}, DType::f32);
  Tensor normed = b.empty(rows.shape(), DType::f32);
  b.rms_norm(rows, final_norm_, float(config_.rms_norm_eps), normed);
  b.matmul(normed, lm_head_, nullptr, out, bf16());
  if (config_.final_logit_softcapping) b.soft_cap(out, float(*config_.final_logit_softcapping));
  if (whole) result.logits = b.download(picked ? out.slice_rows(0, whole) : out);
  if (picked) {
    Tensor ids = b.empty({picked}, DType::i32);
    b.pick_rows(whole ? out.slice_rows(whole, n) : out, layout.pick_rules, ids);
    result.picks = b.download(ids);
  }
  return result;
}

}  // namespace fathom
