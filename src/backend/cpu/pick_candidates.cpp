// The candidates of a sampled pick, in the order a draw walks them: one
// definition for the host sampler (Sampler::distribution) and the picks
// made where the logits are (cpu::pick_token, which the device kernels
// follow).
#include "backend/cpu/pick_candidates.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/kernels.h"

namespace fathom::cpu {

void pick_candidates(std::span<float> x, int64_t top_k, float top_p, float min_p, PickCandidates& out) {
  out.ids.clear();
  out.probs.clear();
  const int64_t vocab = int64_t(x.size());
  // A NaN is no candidate: as −inf its weight is 0 and it ranks last.
  for (float& v : x)
    if (std::isnan(v)) v = -INFINITY;
  auto& order = out.order;
  order.resize(size_t(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Rank: the larger value first, the lower id among equals.
  const auto better = [&](int32_t a, int32_t b) { return x[size_t(a)] > x[size_t(b)] || (x[size_t(a)] == x[size_t(b)] && a < b); };
  int64_t keep = vocab;
  if (top_k > 0 && top_k < vocab) {
    keep = top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), better);
  } else {
    std::swap(order[0], order[size_t(argmax(x))]);  // the best first, for min-p and top-p
  }
  const float max_value = x[size_t(order[0])];
  if (!std::isfinite(max_value)) {  // an infinite best value takes all the mass
    out.ids.push_back(order[0]);
    out.probs.push_back(1.0);
    return;
  }
  // Softmax weights exp(x − max) of the kept ids, by id.
  auto& weight = out.weight;
  weight.resize(size_t(vocab));
  double total = 0.0;
  if (keep == vocab)  // every id, in id order (vectorized: ~0.5 ms a row of 152k ids with std::exp)
    total = best_exp_weights()(x.data(), max_value, vocab, weight.data());
  else
    for (int64_t i = 0; i < keep; ++i)
      total += weight[size_t(order[size_t(i)])] = std::exp(double(x[size_t(order[size_t(i)])] - max_value));
  if (top_p < 1.0f) {
    // The nucleus: the fewest best candidates whose probabilities reach
    // top_p. Ranked only as far as it reaches (a few hundred ids of a trained
    // model's distribution), not the whole vocabulary: ranking 152k ids took
    // ~13 ms. Each round ranks the next best ids, and what lies past them is
    // no better: the best 256, then 4,096, then all.
    int64_t ranked_ids = keep == vocab ? 1 : keep;  // without top-k only the best is in place
    double cumulative = 0.0;
    int64_t counted = 0;
    for (int64_t want = std::min<int64_t>(keep, 256);; want = std::min(keep, want * 16)) {
      if (want >= keep / 8) want = keep;
      if (want > ranked_ids) {
        if (want <= 256) {  // a heap of 256 rejects most ids with one compare
          std::partial_sort(order.begin() + ranked_ids, order.begin() + want, order.begin() + keep, better);
        } else {
          if (want < keep) std::nth_element(order.begin() + ranked_ids, order.begin() + want, order.begin() + keep, better);
          std::sort(order.begin() + ranked_ids, order.begin() + want, better);
        }
        ranked_ids = want;
      }
      for (; counted < ranked_ids && cumulative < top_p; ++counted) cumulative += weight[size_t(order[size_t(counted)])] / total;
      if (cumulative >= top_p || ranked_ids == keep) break;
    }
    keep = counted;
  }
  // min-p leaves out candidates below min_p × the best one's probability.
  const double threshold = min_p * weight[size_t(order[0])] / total;
  double kept_total = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    const double p = weight[size_t(order[size_t(i)])] / total;
    if (p == 0.0 || (i > 0 && p < threshold)) continue;
    out.ids.push_back(order[size_t(i)]);
    out.probs.push_back(p);
    kept_total += p;
  }
  for (double& p : out.probs) p /= kept_total;
}

int32_t pick_token(std::span<const float> logits, const PickRule& rule) {
  if (rule.temperature == 0.0f) return argmax(logits);
  thread_local std::vector<float> work;
  thread_local PickCandidates candidates;
  work.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) work[i] = logits[i] / rule.temperature;
  pick_candidates(work, rule.top_k, rule.top_p, rule.min_p, candidates);
  double acc = 0.0;
  for (size_t i = 0; i < candidates.ids.size(); ++i)
    if (rule.uniform < (acc += candidates.probs[i])) return candidates.ids[i];
  return candidates.ids.back();  // the uniform at the rounding gap below 1
}

}  // namespace fathom::cpu
