#pragma once
// Gemma 4's mixture-of-experts block, which runs beside the dense MLP on every
// layer when enable_moe_block is set. Its router has its own scale-less
// RMSNorm, a learned input scale and a per-expert output scale; its experts
// are GELU-tanh gated MLPs stored with gate and up fused. Only the experts a
// token picks run for it.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "io/model_config.h"
#include "model/layers.h"
#include "model/moe.h"
#include "model/weights.h"

namespace fathom {

// Each token's top_k experts (descending probability) and routing weights,
// [tokens, top_k] on the backend's device (i32 and f32).
struct Gemma4Routing {
  Tensor ids, weights;
};

struct Gemma4Router {
  Tensor unit;              // [hidden] ones: the router's norm has no weight
  Tensor input_scale;       // [hidden], applied after the scale-less norm
  Tensor proj;              // [experts, hidden], f32 whatever the compute dtype
  Tensor per_expert_scale;  // [experts]
  int64_t top_k = 0;
  float eps = 1e-6f;

  static Gemma4Router load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c);
  int64_t num_experts() const { return proj.dim(0); }

  // x [t, hidden] (the residual stream): softmax over all experts in f32, the
  // top_k kept and renormalized to sum 1, then each scaled by its expert's
  // per_expert_scale.
  Gemma4Routing route(Backend& b, const Tensor& x) const;
};

struct Gemma4Experts {
  ExpertBank experts;  // GELU-tanh; views into the fused [E·2I, H] / [E·H, I] stacks

  // `prefix`.gate_up_proj [E, 2I, H] (gate rows first) and .down_proj [E, H, I],
  // or the unfused per-expert form `prefix`.E.{gate,up,down}_proj.weight.
  static Gemma4Experts load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c);

  // y [t, hidden] ← Σ over each token's chosen experts of weight · expert(x);
  // experts without tokens never run; sums accumulate in expert order.
  void operator()(Backend& b, const Tensor& x, const Gemma4Routing& routing, Tensor& y, bool bf16) const;
};

}  // namespace fathom
