#pragma once
// Runs one sequence: chunked prefill of the prompt, then token-by-token decode.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/prefill_policy.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "engine/token_constraint.h"
#include "model/model.h"

namespace fathom {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 16;
  SamplingParams sampling;
  std::vector<int64_t> stop_ids;  // generation ends after emitting one of these
  // Tokens the sequence's state may hold, when more than prompt + max_new_tokens
  // (a conversation asks for its whole context, so that its next turn can reuse the state).
  int64_t capacity = 0;
  // Optional: changes each row of logits before sampling (logit bias,
  // presence and frequency penalties); sees the ids generated so far.
  std::function<void(std::span<float> logits, std::span<const int32_t> generated)> adjust_logits;
  // Optional: what the output must follow (structured output); masks every
  // row after adjust_logits and sees every emitted token. Drafts it rejects
  // are cut before verification. Used by this request alone.
  std::shared_ptr<TokenConstraint> constraint;
  // Whether on_token reads each token's logits (log-probabilities). Without
  // them a run whose sampling the device does (Sampler::pickable: no
  // repetition penalty) takes its tokens as the device's picks, and
  // its logits never reach the host (on_token then sees none).
  bool token_logits = false;
};

// Speculative decoding for generate(): a drafter and the most tokens it may
// propose per target pass; `adaptive` lets DraftLengthPolicy shorten drafts
// while acceptance is low. Without a drafter every step decodes one token.
struct Speculation {
  Drafter* drafter = nullptr;
  int64_t draft_tokens = 4;
  bool adaptive = true;
};

// What on_token sees for each generated id.
struct GeneratedToken {
  int32_t id = 0;
  std::span<const float> logits;  // the (adjusted) logits it was sampled from; empty for a pick
};

struct GenerationResult {
  std::vector<int32_t> ids;     // generated ids only
  std::string finish_reason;    // "stop" or "length"
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;  // from the first decode step to the last token
  SpeculationStats spec;
};

// Checks every prompt id against the vocabulary; throws naming the bad one.
void validate_token_ids(const std::vector<int32_t>& ids, int64_t vocab_size);

// Prefills `prompt` into `state` in chunks chosen by `policy`. Returns the
// logits of every prompt position ([T, vocab]) when all_logits, else of the last.
Tensor prefill(const Model& model, SequenceState& state, const std::vector<int32_t>& prompt,
               const PrefillPolicy& policy, bool all_logits);

// Generates; on_token (optional) sees each id as it is produced and returns
// false to stop there (finish_reason "stop": a stop string matched, the
// client left).
GenerationResult generate(const Model& model, const PrefillPolicy& policy, const GenerationRequest& request,
                          const std::function<bool(const GeneratedToken&)>& on_token = {},
                          const Speculation& speculation = {});

}  // namespace fathom
