#pragma once
// The memory contract: what a model, its sequences and one step of work take,
// predicted from config.json and the safetensors headers alone (no tensor data
// is read). `fathom fit` prints it, the prefill policy sizes chunks by it, and
// the server admits only work it says fits. Every term mirrors what the code
// really holds, and tests hold each one against the allocations it predicts.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/kv_scheme.h"
#include "kv/kv_layout.h"
#include "model/weights.h"

namespace fathom {

// Where the bytes of `sequences` sequences of `context` tokens go.
struct MemoryBreakdown {
  int64_t context = 0;
  int64_t sequences = 0;
  int64_t prefill_chunk = 0;
  int64_t weights = 0;
  int64_t kv = 0;         // KV and recurrent state of all the sequences, at their peak
  int64_t transient = 0;  // the largest step's working memory
  int64_t runtime = 0;
  int64_t speculation = 0;  // the draft model, and every sequence's per-position recurrent states, verify rows and draft cache
  int64_t total() const { return weights + kv + transient + runtime + speculation; }
};

class MemoryContract {
 public:
  struct Inputs {
    ModelConfig config;
    std::map<std::string, StoredTensor> tensors;  // from the safetensors headers
    ComputeDType dtype = ComputeDType::f32;
    KvScheme kv_scheme = KvScheme::bf16();
    int threads = 1;
    WeightResidence residence = WeightResidence::mapped;
    int64_t sliding_step = kSlidingStepTokens;
    // Where the model runs. On a GPU the terms are device memory: the weights
    // as uploaded, the KV blocks, the steps' working memory and what the
    // CUDA backend keeps (cuBLAS's workspace, the step arena, the KV pool's
    // last slab); the budget is the GPU's.
    Device device = Device::cpu;
  };
  // Checks the scheme against the model (a scheme the model cannot take throws).
  explicit MemoryContract(Inputs inputs);
  // From a model folder: config.json and the safetensors headers.
  static MemoryContract for_model_dir(const std::string& dir, ComputeDType dtype, const KvScheme& scheme,
                                      int threads, WeightResidence residence = WeightResidence::mapped,
                                      Device device = Device::cpu);

  const ModelConfig& config() const { return in_.config; }
  ComputeDType dtype() const { return in_.dtype; }
  const KvScheme& kv_scheme() const { return in_.kv_scheme; }
  Device device() const { return in_.device; }

  // Weights as the loader holds them: every stored tensor (mapped pages, or a
  // private copy rounded to 2 MiB pages), plus the copies it makes: norm
  // weights and routers in f32, matmul weights converted to the compute dtype.
  // On a GPU, only what is uploaded: each tensor in the form the loader gives it.
  int64_t weights_bytes() const;
  // One sequence that grows to `tokens` tokens through chunks of at most
  // `chunk`: the scheme's bytes at that length in the dtype really stored, or,
  // with a delayed start, the conversion's peak when it is larger (plain rows
  // of every layer, one layer's coded copy and the converter's row buffer).
  int64_t kv_bytes(int64_t tokens, int64_t chunk) const;
  // The working memory of a step of `chunk` tokens once the sequence holds
  // `context` tokens: activations, MoE and Gated DeltaNet buffers, the logits,
  // the inputs rounded to bf16 for the matmuls, and every thread's attention
  // tile, whose scores span the whole context.
  int64_t transient_bytes(int64_t chunk, int64_t context) const;
  // The part of transient_bytes a backend keeps between steps (its scratch
  // grows to the largest step and stays): what another model's backend, a
  // draft's, adds beside this one's.
  int64_t backend_scratch_bytes(int64_t chunk, int64_t context) const;
  // The process's own footprint with no model: code, libraries, thread stacks
  // and allocator arenas. Measured once (bench/RESULTS.md, "Memory contract").
  // On a GPU, the device memory the CUDA backend keeps whatever the work.
  int64_t runtime_bytes() const;

  // Speculative decoding, up to `draft_tokens` drafts a step, drafted by the
  // model of the `draft` contract (null: prompt lookup, no model).
  void set_speculation(int64_t draft_tokens, std::shared_ptr<const MemoryContract> draft);
  int64_t draft_tokens() const { return draft_tokens_; }
  // Held once: the draft model's weights.
  int64_t speculation_fixed_bytes() const;
  // What speculation adds to one sequence of `tokens` tokens prefilled in
  // chunks of `chunk`: what the recurrent layers keep while a verify step is
  // open (a state after each drafted position), how much more the
  // verify step's working memory (its rows' logits, the drafts'
  // distributions) needs than a prefill chunk, and the draft model's cache
  // and step working memory.
  int64_t speculation_sequence_bytes(int64_t tokens, int64_t chunk) const;
  // The recurrent (Gated DeltaNet) layers' state of one sequence, with what
  // it keeps during an open speculative step of `step_rows` positions (0: none).
  int64_t recurrent_state_bytes(int64_t step_rows = 0) const;

  // All the terms for `sequences` sequences of `context` tokens, prefilled in
  // chunks of `chunk` tokens.
  MemoryBreakdown predict(int64_t context, int64_t sequences, int64_t chunk) const;
  // The step that a prefill chunk really runs: sliding-window models split
  // longer ones at their sliding step.
  int64_t effective_chunk(int64_t chunk) const;

 private:
  // transient_bytes as {the step's own allocations, the backend's scratch}.
  std::pair<int64_t, int64_t> transient_parts(int64_t chunk, int64_t context) const;
  // The GPU's forms of weights_bytes and of the backend's scratch.
  int64_t device_weights_bytes() const;
  // max_hd: the widest attention head.
  int64_t cuda_scratch_bytes(int64_t t, int64_t context, int64_t rounded_depth, int64_t max_hd) const;
  // The fewest rows a plain KV block of any attention layer holds.
  int64_t kv_min_block_rows() const;
  Inputs in_;
  int64_t draft_tokens_ = 0;
  std::shared_ptr<const MemoryContract> draft_;
};

}  // namespace fathom
