#include "engine/speculative.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace fathom {

DraftVerdict judge_draft(const TokenDistribution& target, const TokenDistribution* draft, int32_t drafted,
                         Sampler& sampler) {
  const double p = target.prob(drafted), q = draft ? draft->prob(drafted) : 1.0;
  check(q > 0.0, "speculative sampling: the draft drew token ", drafted, " at probability 0");
  if (p >= q || sampler.uniform() < p / q) return {true, drafted};
  // The residual max(0, p − q) over the target's candidates (q's others have p = 0).
  int32_t top = 0;
  for (int32_t id : target.ids) top = std::max(top, id);
  std::vector<double> q_of(size_t(top) + 1, 0.0);
  if (draft) {
    for (size_t i = 0; i < draft->ids.size(); ++i)
      if (draft->ids[i] <= top) q_of[size_t(draft->ids[i])] = draft->probs[i];
  } else if (drafted <= top) {
    q_of[size_t(drafted)] = 1.0;
  }
  TokenDistribution residual;
  double total = 0.0;
  for (size_t i = 0; i < target.ids.size(); ++i) {
    const double r = target.probs[i] - q_of[size_t(target.ids[i])];
    if (r <= 0.0) continue;
    residual.ids.push_back(target.ids[i]);
    residual.probs.push_back(r);
    total += r;
  }
  // Rejection needs p < q somewhere, so p > q somewhere else; only rounding leaves nothing.
  if (residual.ids.empty()) return {false, sampler.draw(target)};
  for (auto& r : residual.probs) r /= total;
  return {false, sampler.draw(residual)};
}

DraftLengthPolicy::DraftLengthPolicy(int64_t max_tokens, double relative_cost)
    : max_tokens_(max_tokens), cost_(relative_cost + kVerifyRowCost) {
  check(max_tokens >= 1, "draft length policy: at most ", max_tokens, " tokens");
  check(relative_cost >= 0.0, "draft length policy: relative cost ", relative_cost);
}

int64_t DraftLengthPolicy::next() {
  ++passes_;
  const double a = std::min(acceptance(), 0.999);
  // Expected tokens per pass with k drafts: 1 + a + … + a^k.
  double expected = 1.0, power = 1.0, best_gain = 1.0;
  int64_t best = 0;
  for (int64_t k = 1; k <= max_tokens_; ++k) {
    power *= a;
    expected += power;
    const double gain = expected / (1.0 + cost_ * double(k));
    if (gain > best_gain) {
      best_gain = gain;
      best = k;
    }
  }
  if (best == 0 && passes_ % kProbeEvery == 0) best = 1;
  return best;
}

void DraftLengthPolicy::observe(int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  constexpr double kDecay = 0.9;
  accepted_ = accepted_ * kDecay + double(accepted);
  rejected_ = rejected_ * kDecay + (accepted < drafted ? 1.0 : 0.0);
}

NgramDrafter::NgramDrafter(int64_t max_ngram, int64_t min_ngram) : max_ngram_(max_ngram), min_ngram_(min_ngram) {
  check(min_ngram >= 1 && max_ngram >= min_ngram, "prompt lookup: n-gram sizes ", min_ngram, "..", max_ngram);
}

Draft NgramDrafter::propose(const std::vector<int32_t>& history, int64_t max, Sampler&) {
  const int64_t size = int64_t(history.size());
  for (int64_t n = std::min(max_ngram_, size - 1); n >= min_ngram_; --n) {
    const auto tail = history.end() - n;
    // The most recent earlier occurrence that has tokens after it.
    for (int64_t at = size - n - 1; at >= 0; --at) {
      if (!std::equal(tail, history.end(), history.begin() + at)) continue;
      // Copy what followed, LZ77-style: a copy that runs past the end of the
      // history continues from its own drafts, so a loop of period p (a
      // match p tokens back) drafts the whole `max` tokens of the loop.
      const int64_t from = at + n;
      Draft draft;
      for (int64_t j = 0; j < max; ++j) {
        const int64_t src = from + j;
        draft.tokens.push_back(src < size ? history[size_t(src)] : draft.tokens[size_t(src - size)]);
      }
      return draft;
    }
  }
  return {};
}

ModelDrafter::ModelDrafter(const Model& draft, int64_t capacity, double relative_cost)
    : model_(draft), capacity_(capacity), cost_(relative_cost) {
  check(capacity > 0, "draft model: capacity must be positive, got ", capacity);
  check(relative_cost >= 0.0, "draft model: relative cost ", relative_cost);
}

void ModelDrafter::finish() {
  state_.reset();
  held_.clear();
}

Draft ModelDrafter::propose(const std::vector<int32_t>& history, int64_t max, Sampler& sampler) {
  check(!history.empty(), "draft model: empty history");
  const int64_t vocab = model_.config().vocab_size;
  // The state must hold every token but the last, which the first draft step feeds.
  const size_t context = history.size() - 1;
  if (!state_) state_ = model_.new_state(capacity_);
  size_t common = 0;
  while (common < held_.size() && common < context && held_[common] == history[common]) ++common;
  if (common < held_.size()) {
    try {
      state_->trim(int64_t(common));
    } catch (const Error&) {  // recurrent layers (or dropped window rows) cannot go back: start over
      state_ = model_.new_state(capacity_);
      common = 0;
    }
    held_.resize(common);
  }
  const int64_t room = capacity_ - int64_t(context) - 1;
  max = std::min(max, room);
  if (max <= 0) return {};
  while (common < context) {
    const size_t end = std::min(context, common + size_t(kDraftChunkTokens));
    const std::vector<int32_t> missing(history.begin() + int64_t(common), history.begin() + int64_t(end));
    model_.forward(missing, *state_, false);
    held_.insert(held_.end(), missing.begin(), missing.end());
    common = end;
  }
  Draft draft;
  std::vector<int32_t> seen = history;  // with the drafts so far, for a repetition penalty
  int32_t last = history.back();
  for (int64_t i = 0; i < max; ++i) {
    const Tensor logits = model_.forward({last}, *state_, false);
    held_.push_back(last);
    const std::span<const float> row(logits.data<float>(), size_t(vocab));
    if (sampler.greedy()) {
      last = sampler.sample(row, seen);
    } else {
      sampler.distribution(row, seen, draft.dists.emplace_back());
      last = sampler.draw(draft.dists.back());
    }
    draft.tokens.push_back(last);
    seen.push_back(last);
  }
  return draft;
}

}  // namespace fathom
