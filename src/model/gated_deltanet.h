#pragma once
// The Gated DeltaNet token mixer of Qwen3-Next and Qwen3.5 linear-attention
// layers: projections, a causal depthwise conv1d + SiLU over q/k/v, the gated
// delta rule over an f32 recurrent matrix per value head, a SiLU-gated
// RMSNorm and the output projection — each a backend op (the delta rule's
// chunked and recurrent forms are described in backend/cpu/delta_rule.h).
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"
#include "kv/recurrent_state.h"
#include "model/layers.h"
#include "model/weights.h"

namespace fathom {

using DeltaNetDims = ModelConfig::LinearAttention;

inline DeltaRuleShape delta_rule_shape(const DeltaNetDims& d) {
  return {d.num_key_heads, d.num_value_heads, d.key_head_dim, d.value_head_dim};
}

// Tokens per block of the chunked delta rule (transformers and FLA use 64).
inline constexpr int64_t kDeltaRuleChunk = 64;

// Qwen3-Next fuses the four input projections into in_proj_qkvz and
// in_proj_ba, interleaved per key head ([q | k | v | z] and [b | a], v, z, b
// and a for that head's group of value heads). These orders regroup their rows
// into q|k|v (the conv's channel order) then z, and b then a.
std::vector<int64_t> fused_qkvz_order(const DeltaNetDims& d);
std::vector<int64_t> fused_ba_order(const DeltaNetDims& d);

struct GatedDeltaNet {
  DeltaNetDims dims;
  float eps = 1e-6f;
  // b and a (one row per value head) stay f32 and run in f32 whatever the
  // compute dtype: the decay is exp(−exp(A_log)·softplus(a + dt_bias)), so a
  // bf16 rounding of a is amplified by up to exp(A_log) (16 at init) in the
  // state's decay. Fused folders are regrouped at load into these four.
  Linear in_qkv, in_z, in_b, in_a;
  Tensor conv_weight;  // [conv_dim, conv_kernel] f32
  Tensor neg_a;        // [value_heads] −exp(A_log), f32
  Tensor dt_bias;      // [value_heads]
  Tensor norm;         // [value_head_dim], the gated RMSNorm's weight (plain w, not 1 + w)
  Linear out;

  // Weights under `prefix` (e.g. "model.layers.0.linear_attn").
  static GatedDeltaNet load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c);
};

// One sequence's activations, reused by every linear-attention layer.
struct GatedDeltaNetScratch {
  Tensor qkv;   // [t, conv_dim] projected q|k|v
  Tensor conv;  // [t, conv_dim] after conv + SiLU, then q/k normalised in place
  Tensor z;     // [t, value_dim] output gate
  Tensor b, a;  // [t, value_heads] → beta, g in place
  Tensor core;  // [t, value_dim] delta-rule output, then normed and gated
  GatedDeltaNetScratch(Backend& backend, int64_t t, const DeltaNetDims& d);
};

// out [t, hidden] ← the layer over h [t, hidden]; advances `state`.
void run_gated_deltanet(Backend& b, const GatedDeltaNet& net, const Tensor& h, RecurrentState& state,
                        GatedDeltaNetScratch& s, Tensor& out, bool bf16);

}  // namespace fathom
