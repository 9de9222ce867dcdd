#pragma once
// A loaded model: immutable after loading and shared by every sequence; each
// sequence owns its state (one KV layer per attention layer).
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "io/model_config.h"
#include "kv/block_pool.h"
#include "kv/kv_layer.h"
#include "kv/kv_layout.h"
#include "kv/kv_scheme.h"
#include "kv/recurrent_state.h"
#include "kv/sequence_state.h"
#include "model/step.h"
#include "model/weights.h"

namespace fathom {

struct LoadOptions {
  ComputeDType dtype = ComputeDType::f32;
  KvScheme kv_scheme = KvScheme::bf16();
  // Longest step sliding-window layers take at once (they keep window - 1 +
  // this rows); tests shrink it to exercise reusing old blocks.
  int64_t sliding_step = kSlidingStepTokens;
  // mapped: weights are views of the mmapped files (no copy). ram: one private
  // copy on 2 MiB pages, faster to stream at decode, costs the load-time copy
  // and keeps the weights out of the shared page cache.
  WeightResidence weight_residence = WeightResidence::mapped;
  // Where the model runs: "cpu", "cuda" or "cuda:N" (make_backend).
  std::string device = "cpu";
};

class Model {
 public:
  // The most rows a step may have to be recorded and replayed, and the most
  // of one sequence in it: decode rows and verify spans, not prefill chunks,
  // whose shapes rarely repeat. The memory contract sizes the CUDA step arena
  // by the first. 64: a server's full batch of decode rows (eager steps of
  // 17-64 rows ran at a third of the GPU's pace: the host's launches set it).
  static constexpr int64_t kReplayableStepRows = 64, kReplayableSequenceRows = 16;
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual ComputeDType compute_dtype() const = 0;
  // A fresh sequence able to hold `capacity` tokens.
  virtual std::unique_ptr<SequenceState> new_state(int64_t capacity) const = 0;
  // Runs a step over many sequences (model/step.h): each sequence's ids at
  // positions [state.length(), state.length() + ids.size()), appended to its
  // state. Returns the logits and picks its sequences asked for
  // (model/step.h). A sequence's run longer than its state's max_step goes
  // through several steps (exact: chunked prefill is exact).
  StepOutput forward(std::span<const SequenceStep> step) const;
  // One sequence: a step of one. Logits [ids.size(), vocab] when all_logits,
  // otherwise [1, vocab] for the last position.
  Tensor forward(const std::vector<int32_t>& ids, SequenceState& state, bool all_logits) const;
  const KvScheme& kv_scheme() const { return kv_scheme_; }
  // Exact KV bytes of one sequence holding `tokens` tokens under this model's scheme.
  int64_t kv_bytes_at(int64_t tokens) const;
  // What each further token adds, averaged over a block (fixed recurrent
  // state left out): blocks are taken kKvBlockTokens tokens at a time.
  int64_t kv_bytes_per_token() const;
  // Bytes of weights in memory (mapped plus converted).
  virtual int64_t weight_bytes() const = 0;
  std::string backend_name() const { return backend_->name(); }
  // Where the model's tensors and its sequences' states live.
  Backend& backend() const { return *backend_; }
  // The pool every sequence of this model takes its KV blocks from.
  KvBlockPool& kv_pool() const;

 protected:
  explicit Model(const LoadOptions& options);
  // One step whose segments are each at most their state's max_step rows
  // (checked); returns the logits of layout.logit_rows and the picks of
  // layout.pick_rows. forward() ends each state's step afterwards.
  virtual StepOutput forward_step(const StepLayout& layout) const = 0;
  // Per layer as the config says: a KV layer for each attention layer that
  // owns its cache (sliding ones reuse their oldest block), coded as the scheme says, plain
  // storage in the compute dtype (f32 keeps f32 compute exact); a recurrent
  // state for each linear-attention layer.
  std::unique_ptr<SequenceState> make_state(const ModelConfig& config, int64_t capacity) const;
  // Whether a step may run through Backend::run_step (recorded and replayed).
  bool replayable(const StepLayout& layout) const;
  DType plain_kv_dtype() const { return compute_dtype() == ComputeDType::bf16 ? DType::bf16 : DType::f32; }

  // Every op of the model and its KV blocks run here.
  std::shared_ptr<Backend> backend_;

 private:
  KvScheme kv_scheme_;
  int64_t sliding_step_;
  mutable std::once_flag pool_once_;
  mutable std::shared_ptr<KvBlockPool> pool_;
};

// Loads a Hugging Face model folder; the architecture comes from config.json's
// model_type. An unknown model_type is an error listing the supported ones.
std::unique_ptr<Model> load_model(const std::string& model_dir, const LoadOptions& options);
std::vector<std::string> supported_model_types();
// Throws naming the supported types when `model_type` is not one of them.
void require_supported_model_type(const std::string& model_type);

}  // namespace fathom
