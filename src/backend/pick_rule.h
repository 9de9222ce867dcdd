#pragma once
// How a row's next token is picked where its logits are (Backend::pick_rows,
// cpu::pick_token): greedy, or drawn from softmax(logits / temperature) with
// the candidates below min_p × the best one's probability left out, by
// `uniform`, a number in [0, 1) the run's seeded generator drew. Top-k, top-p
// and a repetition penalty are the host sampler's alone (Sampler).
namespace fathom {

struct PickRule {
  float temperature = 0.0f;  // 0: greedy
  float min_p = 0.0f;        // 0: every candidate
  double uniform = 0.0;
};

}  // namespace fathom
