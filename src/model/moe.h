#pragma once
// A sparse mixture-of-experts MLP (Qwen3-MoE, Qwen3-Next): a router picks the
// top-k experts per token from a softmax over all experts, and only those
// experts run. Qwen3-Next adds a shared expert that every token runs, scaled
// by a per-token sigmoid gate.
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"
#include "model/layers.h"
#include "model/weights.h"

namespace fathom {

struct SparseMoe {
  Tensor router;                  // [experts, hidden], f32
  ExpertBank experts;             // SwiGLU, moe_intermediate_size each
  int64_t top_k = 0;
  bool norm_topk_prob = false;
  std::optional<GatedMlp> shared_expert;     // shared_expert_intermediate_size
  std::optional<Tensor> shared_expert_gate;  // [1, hidden], f32

  // Loads `prefix`.gate.weight and either per-expert weights
  // (`prefix`.experts.E.{gate,up,down}_proj.weight, what transformers saves) or
  // the fused form (`prefix`.experts.gate_up_proj [E, 2I, H], .down_proj [E, H, I]);
  // with config.shared_expert_intermediate_size also `prefix`.shared_expert
  // and `prefix`.shared_expert_gate.weight.
  static SparseMoe load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c);

  // y [t, hidden] ← Σ over each token's top-k experts of weight · expert(x)
  // (+ sigmoid(gate · x) · shared_expert(x)).
  void operator()(Backend& b, const Tensor& x, Tensor& y, bool bf16) const;

 private:
  void add_shared_expert(Backend& b, const Tensor& x, Tensor& y, bool bf16) const;
};

// A bank of E gated-MLP experts with activation `act`: `prefix`.gate_up_proj
// [E, 2I, H] (gate rows first) with .down_proj [E, H, I], what transformers 5
// saves, or one folder per expert, `prefix`.E.{gate,up,down}_proj.weight, or
// MLX's switch layer (the parent of `prefix`).switch_mlp.{gate,up,down}_proj.weight
// [E, out, in]. Bound to the loader's backend (Backend::bind_experts).
ExpertBank load_experts(const WeightLoader& w, const std::string& prefix, int64_t experts, int64_t hidden,
                        int64_t intermediate, GateActivation act);

}  // namespace fathom
