#pragma once
// What every decoder-only architecture shares: the loaded weights, the
// backend, the embedding / final norm / LM head, the per-step argument checks
// and the final projection to logits. Architecture files add their layers.
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/weights.h"

namespace fathom {

class DecoderModel : public Model {
 public:
  const ModelConfig& config() const override { return config_; }
  ComputeDType compute_dtype() const override { return dtype_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  std::unique_ptr<SequenceState> new_state(int64_t capacity) const override { return make_state(config_, capacity); }

 protected:
  DecoderModel(ModelConfig config, WeightStore weights, const LoadOptions& options);

  // Rejects linear-attention layers, which these decoders do not have.
  void require_attention_layers() const;
  // Where the text model's weights live: "model." (…ForCausalLM) or, in
  // multimodal folders, "model.language_model." (transformers 5) or
  // "language_model.model." (older).
  std::string text_prefix(const WeightLoader& w) const;
  // lm_head.weight (language_model.lm_head.weight in older multimodal folders),
  // or the embeddings `root`embed_tokens.weight when tied or absent.
  void load_lm_head(const WeightLoader& w, const std::string& root);
  // final_norm then lm_head over the rows of x the step wants logits or
  // picks for, soft-capped when the config says so; the whole rows and the
  // picks (taken on the device) brought to the host.
  StepOutput logits(const Tensor& x, const StepLayout& layout) const;
  bool bf16() const { return dtype_ == ComputeDType::bf16; }
  // Call last in the architecture's constructor: on the CPU the weights mapped
  // plus converted, on another device what was placed there.
  void count_weight_bytes(const WeightLoader& w) {
    weight_bytes_ = backend_->device() == Device::cpu ? weights_.total_bytes() + w.converted_bytes() : w.device_bytes();
  }

  ModelConfig config_;
  WeightStore weights_;
  ComputeDType dtype_;
  Tensor embed_, final_norm_, lm_head_;

 private:
  int64_t weight_bytes_ = 0;
};

}  // namespace fathom
