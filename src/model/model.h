#pragma once
// A loaded model: immutable after loading and shared by every sequence; each
// sequence owns its state (one KV layer per attention layer).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/model_config.h"
#include "kv/kv_layer.h"
#include "model/weights.h"

namespace fathom {

struct SequenceState {
  std::vector<std::unique_ptr<KvLayer>> kv;  // [num_layers]
  int64_t length() const { return kv.empty() ? 0 : kv.front()->length(); }
  int64_t capacity() const { return kv.empty() ? 0 : kv.front()->capacity(); }
  int64_t bytes() const;
  void trim(int64_t new_length);
};

struct LoadOptions {
  ComputeDType dtype = ComputeDType::f32;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual ComputeDType compute_dtype() const = 0;
  // A fresh sequence able to hold `capacity` tokens.
  virtual std::unique_ptr<SequenceState> new_state(int64_t capacity) const = 0;
  // Runs `ids` at positions [state.length(), state.length() + ids.size()) and
  // appends their keys/values to the state. Returns f32 logits: [ids.size(), vocab]
  // when all_logits, otherwise [1, vocab] for the last position.
  virtual Tensor forward(const std::vector<int32_t>& ids, SequenceState& state, bool all_logits) const = 0;
  // Bytes of weights in memory (mapped plus converted).
  virtual int64_t weight_bytes() const = 0;
  virtual std::string backend_name() const = 0;
};

// Loads a Hugging Face model folder; the architecture comes from config.json's
// model_type. An unknown model_type is an error listing the supported ones.
std::unique_ptr<Model> load_model(const std::string& model_dir, const LoadOptions& options);
std::vector<std::string> supported_model_types();

}  // namespace fathom
