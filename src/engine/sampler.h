#pragma once
// Turns logits into the next token: repetition penalty, temperature, top-k,
// top-p, min-p, then a draw from a seeded generator. Temperature 0 is greedy.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

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

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // `history` holds the prompt and generated ids (for the repetition penalty).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  std::vector<int32_t> order_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace fathom
