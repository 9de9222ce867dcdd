#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/kernels.h"
#include "core/error.h"

namespace fathom {

void SamplingParams::validate() const {
  check(std::isfinite(temperature) && temperature >= 0.0f, "temperature must be >= 0, got ", temperature);
  check(top_k >= 0, "top_k must be >= 0, got ", top_k);
  check(top_p > 0.0f && top_p <= 1.0f, "top_p must be in (0, 1], got ", top_p);
  check(min_p >= 0.0f && min_p <= 1.0f, "min_p must be in [0, 1], got ", min_p);
  check(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f, "repetition_penalty must be > 0, got ",
        repetition_penalty);
}

// Below this a temperature is greedy (as vLLM does): dividing logits by a
// subnormal one turns them into infinities, and inf − inf into NaN.
constexpr float kGreedyBelowTemperature = 1e-5f;

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  params_.validate();
  if (params_.temperature < kGreedyBelowTemperature) params_.temperature = 0.0f;
}

bool Sampler::pickable(const SamplingParams& params) {
  return params.repetition_penalty == 1.0f &&
         (params.temperature < kGreedyBelowTemperature || (params.top_k == 0 && params.top_p >= 1.0f));
}

PickRule Sampler::next_pick_rule() {
  check(pickable(params_), "sampler: top-k, top-p and the repetition penalty are not picked where the logits are");
  if (params_.temperature == 0.0f) return {};
  return {params_.temperature, params_.min_p, uniform()};
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  if (pickable(params_)) return cpu::pick_token(logits, next_pick_rule());  // greedy: argmax, no copy
  distribution(logits, history, scratch_);
  return draw(scratch_);
}

double TokenDistribution::prob(int32_t id) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == id) return probs[i];
  return 0.0;
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::draw(const TokenDistribution& dist) {
  check(!dist.ids.empty() && dist.ids.size() == dist.probs.size(), "sampler: drawing from an empty distribution");
  if (dist.ids.size() == 1) return dist.ids[0];
  const double r = uniform();
  double acc = 0.0;
  for (size_t i = 0; i < dist.ids.size(); ++i) {
    acc += dist.probs[i];
    if (r < acc) return dist.ids[i];
  }
  return dist.ids.back();  // r at the rounding gap below 1
}

void Sampler::distribution(std::span<const float> logits, std::span<const int32_t> history, TokenDistribution& out) {
  out.ids.clear();
  out.probs.clear();
  auto point_mass = [&](int32_t id) {
    out.ids.push_back(id);
    out.probs.push_back(1.0);
  };
  if (params_.temperature == 0.0f && params_.repetition_penalty == 1.0f) return point_mass(cpu::argmax(logits));
  work_.assign(logits.begin(), logits.end());
  const int64_t vocab = int64_t(work_.size());
  if (params_.repetition_penalty != 1.0f) {
    // Once per distinct id, however often it occurred (as transformers does).
    std::vector<int32_t> seen(history.begin(), history.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= vocab) continue;
      float& l = work_[id];
      l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
  }
  if (params_.temperature == 0.0f) return point_mass(cpu::argmax(work_));

  for (auto& l : work_) l /= params_.temperature;
  // Candidates best first. Only top-k and top-p need an order; min-p alone and
  // plain temperature sampling keep the whole vocabulary unsorted.
  order_.resize(size_t(vocab));
  std::iota(order_.begin(), order_.end(), 0);
  int64_t keep = vocab;
  auto by_logit = [&](int32_t a, int32_t b) { return work_[a] > work_[b]; };
  if (params_.top_k > 0 && params_.top_k < vocab) {
    keep = params_.top_k;
    std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), by_logit);
  } else {
    std::swap(order_[0], order_[size_t(cpu::argmax(work_))]);  // the best first, for min-p and top-p
  }
  // Softmax over the kept candidates: probs_[id] ∝ exp(logit − max).
  const float max_logit = work_[order_[0]];
  if (!std::isfinite(max_logit)) return point_mass(order_[0]);  // an infinite best logit takes all the mass
  probs_.resize(size_t(vocab));
  double total = 0.0;
  if (keep == vocab)  // every id, in id order (vectorized: ~0.5 ms a token at 152k ids with std::exp)
    total = cpu::best_exp_weights()(work_.data(), max_logit, vocab, probs_.data());
  else
    for (int64_t i = 0; i < keep; ++i) total += probs_[order_[i]] = std::exp(double(work_[order_[i]] - max_logit));
  if (params_.top_p < 1.0f) {
    // The nucleus: the fewest best candidates whose probabilities reach
    // top_p. Sorted only as far as it reaches (a few hundred ids of a trained
    // model's distribution), not the whole vocabulary: sorting 152k ids took
    // ~13 ms a token. Each round puts the next best ids in order, and what
    // lies past them is no better: the best 256, then 4,096, then all.
    int64_t sorted = keep == vocab ? 1 : keep;  // without top-k only the best is in place
    double cumulative = 0.0;
    int64_t counted = 0;
    for (int64_t want = std::min<int64_t>(keep, 256);; want = std::min(keep, want * 16)) {
      if (want >= keep / 8) want = keep;
      if (want > sorted) {
        if (want <= 256) {  // a heap of 256 rejects most ids with one compare
          std::partial_sort(order_.begin() + sorted, order_.begin() + want, order_.begin() + keep, by_logit);
        } else {
          if (want < keep) std::nth_element(order_.begin() + sorted, order_.begin() + want, order_.begin() + keep, by_logit);
          std::sort(order_.begin() + sorted, order_.begin() + want, by_logit);
        }
        sorted = want;
      }
      for (; counted < sorted && cumulative < params_.top_p; ++counted) cumulative += probs_[order_[counted]] / total;
      if (cumulative >= params_.top_p || sorted == keep) break;
    }
    keep = counted;
  }
  // min-p drops candidates below min_p × the top probability (order_[0] is the top).
  const double threshold = params_.min_p * probs_[order_[0]] / total;
  double kept_total = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    const double p = probs_[order_[i]] / total;
    if (p == 0.0 || (i > 0 && p < threshold)) continue;
    out.ids.push_back(order_[i]);
    out.probs.push_back(p);
    kept_total += p;
  }
  for (auto& p : out.probs) p /= kept_total;
}

}  // namespace fathom
