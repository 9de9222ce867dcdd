#pragma once
// The Gated DeltaNet token mixer of Qwen3-Next and Qwen3.5 linear-attention
// layers: projections, a causal depthwise conv1d + SiLU over q/k/v, the gated
// delta rule over an f32 recurrent matrix per value head, a SiLU-gated
// RMSNorm and the output projection.
//
// The delta rule, per value head, with S [key_head_dim, value_head_dim]:
//   S ← exp(g_t)·S;  S ← S + k_t·(β_t·(v_t − Sᵀk_t))ᵀ;  o_t = Sᵀq_t
// Decode (one token) and speculative verify steps (which keep the state after
// every position, see RecurrentState) run it as written. Prefill runs it in
// chunks: inside a chunk the updates form a unit lower-triangular system (the
// UT transform) solved by forward substitution, so a chunk is a few small
// matrix products instead of one rank-1 update per token; the state carries
// across chunks.
#include <cstdint>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "io/model_config.h"
#include "kv/recurrent_state.h"
#include "model/layers.h"
#include "model/weights.h"

namespace fathom {

using DeltaNetDims = ModelConfig::LinearAttention;

// Tokens per block of the chunked delta rule (transformers and FLA use 64).
inline constexpr int64_t kDeltaRuleChunk = 64;

// Causal depthwise conv1d over t tokens, then SiLU. x, out [t, channels] (rows
// `stride` floats apart, out may not alias x); weight [channels, kernel], tap
// kernel − 1 on the current token; state [channels, kernel − 1] holds the
// previous kernel − 1 inputs (oldest first) and is advanced past these t.
void causal_conv1d_silu(const float* x, int64_t t, int64_t channels, int64_t stride, const float* weight,
                        int64_t kernel, float* state, float* out);

// One chunk of inputs to the delta rule. q and k are per key head (value head
// h reads key head h / (value_heads / key_heads)), already L2-normalised, q
// also scaled by key_head_dim^-0.5. Rows of q, k, v are the given stride apart.
struct DeltaRuleInputs {
  const float* q = nullptr;     // [t, key_heads, key_head_dim]
  const float* k = nullptr;     // [t, key_heads, key_head_dim]
  const float* v = nullptr;     // [t, value_heads, value_head_dim]
  const float* g = nullptr;     // [t, value_heads]: log of the decay, <= 0
  const float* beta = nullptr;  // [t, value_heads]
  int64_t t = 0;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
};

// out [t, value_heads, value_head_dim] ← the rule token by token; state
// [value_heads, key_head_dim, value_head_dim] advances past the t tokens.
// With `copies`, each non-null copies[i] (same shape as the state) receives
// the state after token i.
void gated_delta_rule_recurrent(const DeltaNetDims& d, const DeltaRuleInputs& in, float* state, float* out,
                                float* const* copies = nullptr);
// The same result computed in blocks of `chunk` tokens (equal up to rounding).
void gated_delta_rule_chunked(const DeltaNetDims& d, const DeltaRuleInputs& in, int64_t chunk, float* state,
                              float* out);

struct GatedDeltaNet {
  DeltaNetDims dims;
  float eps = 1e-6f;
  // Qwen3.5 stores the four input projections apart; Qwen3-Next fuses them
  // into in_proj_qkvz and in_proj_ba, interleaved per key head. b and a (one
  // row per value head) stay f32 and run in f32 whatever the compute dtype:
  // the decay is exp(−exp(A_log)·softplus(a + dt_bias)), so a bf16 rounding of
  // a is amplified by up to exp(A_log) (16 at init) in the state's decay.
  Linear in_qkv, in_z, in_b, in_a;
  std::optional<Linear> in_qkvz, in_ba;
  Tensor conv_weight;  // [conv_dim, conv_kernel] f32
  Tensor neg_a;        // [value_heads] −exp(A_log), f32
  Tensor dt_bias;      // [value_heads]
  Tensor norm;         // [value_head_dim], the gated RMSNorm's weight (plain w, not 1 + w)
  Linear out;

  // Weights under `prefix` (e.g. "model.layers.0.linear_attn").
  static GatedDeltaNet load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c);
};

// One chunk's activations, reused by every linear-attention layer.
struct GatedDeltaNetScratch {
  Tensor qkv;   // [t, conv_dim] projected q|k|v
  Tensor conv;  // [t, conv_dim] after conv + SiLU, then q/k normalised in place
  Tensor z;     // [t, value_dim] output gate
  Tensor b, a;  // [t, value_heads] → beta, g in place
  Tensor core;  // [t, value_dim] delta-rule output, then normed and gated
  Tensor fused_qkvz, fused_ba;  // Qwen3-Next only: the fused projections
  GatedDeltaNetScratch(int64_t t, const DeltaNetDims& d, bool fused);
};

// out [t, hidden] ← the layer over h [t, hidden]; advances `state`.
void run_gated_deltanet(Backend& b, const GatedDeltaNet& net, const Tensor& h, RecurrentState& state,
                        GatedDeltaNetScratch& s, Tensor& out, bool bf16);

}  // namespace fathom
