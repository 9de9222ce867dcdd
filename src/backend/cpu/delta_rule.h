#pragma once
// Gated DeltaNet kernels on host memory (the CPU backend's ops call these;
// tests call them with raw rows).
//
// The delta rule, per value head, with S [key_head_dim, value_head_dim]:
//   S ← exp(g_t)·S;  S ← S + k_t·(β_t·(v_t − Sᵀk_t))ᵀ;  o_t = Sᵀq_t
// Decode (one token) and speculative verify steps (which keep the state after
// every position) run it as written. Prefill runs it in chunks: inside a chunk
// the updates form a unit lower-triangular system (the UT transform) solved
// by forward substitution, so a chunk is a few small matrix products instead
// of one rank-1 update per token; the state carries across chunks.
#include <cstdint>

#include "backend/backend.h"

namespace fathom::cpu {

// Causal depthwise conv1d over t tokens, then SiLU. x, out [t, channels] (rows
// `stride` floats apart, out may not alias x); weight [channels, kernel], tap
// kernel − 1 on the current token; state [channels, kernel − 1] holds the
// previous kernel − 1 inputs (oldest first) and is advanced past these t.
void causal_conv1d_silu(const float* x, int64_t t, int64_t channels, int64_t stride, const float* weight,
                        int64_t kernel, float* state, float* out);

// One run of inputs to the delta rule. q and k are per key head, already
// L2-normalised, q also scaled by key_head_dim^-0.5. Rows of q, k, v are the
// given stride apart.
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
void gated_delta_rule_recurrent(const DeltaRuleShape& d, const DeltaRuleInputs& in, float* state, float* out,
                                float* const* copies = nullptr);
// The same result computed in blocks of `chunk` tokens (equal up to rounding).
void gated_delta_rule_chunked(const DeltaRuleShape& d, const DeltaRuleInputs& in, int64_t chunk, float* state,
                              float* out);

}  // namespace fathom::cpu
