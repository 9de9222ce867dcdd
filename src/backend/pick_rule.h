#pragma once
// How a row's next token is picked where its logits are (Backend::pick_rows,
// cpu::pick_token): greedy, or drawn from softmax(logits / temperature) over
// the top_k best ids, then the fewest best whose probabilities reach top_p,
// less those below min_p × the best one's probability
// (cpu::pick_candidates), by `uniform`, a number in [0, 1) the run's seeded
// generator drew. A repetition penalty is the host sampler's alone (Sampler).
#include <cstdint>

namespace fathom {

struct PickRule {
  float temperature = 0.0f;  // 0: greedy
  float min_p = 0.0f;        // 0: every candidate
  double uniform = 0.0;
  int64_t top_k = 0;         // 0: every id
  float top_p = 1.0f;        // 1: every id
};

}  // namespace fathom
