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
#include "kv/kv_scheme.h"
#include "model/weights.h"

namespace fathom {

struct SequenceState {
  std::vector<std::unique_ptr<KvLayer>> kv;  // [num_layers]
  int64_t length() const { return kv.empty() ? 0 : kv.front()->length(); }
  int64_t capacity() const { return kv.empty() ? 0 : kv.front()->capacity(); }
  int64_t bytes() const;
  void trim(int64_t new_length);
  // After every chunk or decode step: lets layers with a delayed start convert.
  void end_step();
};

struct LoadOptions {
  ComputeDType dtype = ComputeDType::f32;
  KvScheme kv_scheme = KvScheme::bf16();
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
  const KvScheme& kv_scheme() const { return kv_scheme_; }
  // Exact KV bytes of one sequence holding `tokens` tokens under this model's scheme.
  int64_t kv_bytes_at(int64_t tokens) const;
  // Bytes of weights in memory (mapped plus converted).
  virtual int64_t weight_bytes() const = 0;
  virtual std::string backend_name() const = 0;

 protected:
  explicit Model(KvScheme kv_scheme) : kv_scheme_(std::move(kv_scheme)) {}
  // One KV layer per attention layer, as the scheme says; plain storage in
  // the compute dtype (f32 keeps f32 compute exact).
  std::unique_ptr<SequenceState> make_state(const ModelConfig& config, int64_t capacity) const;
  DType plain_kv_dtype() const { return compute_dtype() == ComputeDType::bf16 ? DType::bf16 : DType::f32; }

 private:
  KvScheme kv_scheme_;
};

// Loads a Hugging Face model folder; the architecture comes from config.json's
// model_type. An unknown model_type is an error listing the supported ones.
std::unique_ptr<Model> load_model(const std::string& model_dir, const LoadOptions& options);
std::vector<std::string> supported_model_types();

}  // namespace fathom
