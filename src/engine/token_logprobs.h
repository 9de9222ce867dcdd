#pragma once
// A token's log-probability under the logits it was drawn from, and the
// vocabulary's best few: what the OpenAI APIs' logprobs / top_logprobs report.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace fathom {

struct TokenLogprobs {
  float logprob = 0.0f;                          // log softmax(logits)[id]
  std::vector<std::pair<int32_t, float>> top;    // the best top_n ids, best first (ties: lower id first)
};

// One pass for the log-normalizer (vectorized: the server takes it over the
// whole vocabulary for every token of every sequence it reports logprobs for)
// and one for the top_n ids. top_n ≤ 0 asks for none.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t id, int top_n);

}  // namespace fathom
