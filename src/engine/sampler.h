#pragma once
// Turns logits into the next token: repetition penalty, temperature, top-k,
// top-p, min-p, then a draw from a seeded generator. Temperature 0 is greedy.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "backend/cpu/pick_candidates.h"
#include "backend/pick_rule.h"

namespace fathom {

struct SamplingParams {
  float temperature = 1.0f;          // 0 → greedy
  int64_t top_k = 0;                 // 0 → off
  float top_p = 1.0f;                // 1 → off
  float min_p = 0.0f;                // 0 → off
  float repetition_penalty = 1.0f;   // 1 → off (HF semantics: divide positive logits, multiply negative)
  uint64_t seed = 0;

  void validate() const;  // throws on out-of-range values, naming the field
};

// What a sampler draws from after every transform: the candidates left with
// a non-zero probability and their probabilities, which sum to 1. Greedy
// sampling is one candidate of probability 1.
struct TokenDistribution {
  std::vector<int32_t> ids;
  std::vector<double> probs;
  double prob(int32_t id) const;  // 0 for an id that is not a candidate
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // Whether a sampler of these parameters draws as Backend::pick_rows does,
  // where the logits are: any but a repetition penalty (which reads the
  // run's history).
  static bool pickable(const SamplingParams& params);
  // The rule its next token is picked by (that token's uniform drawn now
  // when it samples); for a pickable sampler.
  PickRule next_pick_rule();
  // `history` holds the prompt and generated ids (for the repetition penalty).
  // A pickable sampler's draw is cpu::pick_token by next_pick_rule().
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  // The distribution sample() draws from, into `out`.
  void distribution(std::span<const float> logits, std::span<const int32_t> history, TokenDistribution& out);
  int32_t draw(const TokenDistribution& dist);
  double uniform();  // in [0, 1), from the seeded generator
  bool greedy() const { return params_.temperature == 0.0f; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  cpu::PickCandidates candidates_;
  TokenDistribution scratch_;
};

}  // namespace fathom
