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

bool Sampler::pickable(const SamplingParams& params) { return params.repetition_penalty == 1.0f; }

PickRule Sampler::next_pick_rule() {
  check(pickable(params_), "sampler: a repetition penalty is not picked where the logits are");
  if (params_.temperature == 0.0f) return {};
  return {params_.temperature, params_.min_p, uniform(), params_.top_k, params_.top_p};
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
  cpu::pick_candidates(work_, params_.top_k, params_.top_p, params_.min_p, candidates_);
  out.ids.swap(candidates_.ids);
  out.probs.swap(candidates_.probs);
}

}  // namespace fathom
