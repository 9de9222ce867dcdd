#include "engine/speculative.h"

#include <algorithm>

#include "core/error.h"
#include "engine/sampler.h"

namespace fathom {

NgramDrafter::NgramDrafter(int64_t max_ngram, int64_t min_ngram) : max_ngram_(max_ngram), min_ngram_(min_ngram) {
  check(min_ngram >= 1 && max_ngram >= min_ngram, "prompt lookup: n-gram sizes ", min_ngram, "..", max_ngram);
}

std::vector<int32_t> NgramDrafter::propose(const std::vector<int32_t>& history, int64_t max) {
  const int64_t size = int64_t(history.size());
  for (int64_t n = std::min(max_ngram_, size - 1); n >= min_ngram_; --n) {
    const auto tail = history.end() - n;
    // The most recent earlier occurrence that has tokens after it.
    for (int64_t at = size - n - 1; at >= 0; --at) {
      if (!std::equal(tail, history.end(), history.begin() + at)) continue;
      const int64_t from = at + n, count = std::min(max, size - from);
      return {history.begin() + from, history.begin() + from + count};
    }
  }
  return {};
}

ModelDrafter::ModelDrafter(const Model& draft, int64_t capacity) : model_(draft), capacity_(capacity) {
  check(capacity > 0, "draft model: capacity must be positive, got ", capacity);
  state_ = model_.new_state(capacity_);
}

std::vector<int32_t> ModelDrafter::propose(const std::vector<int32_t>& history, int64_t max) {
  check(!history.empty(), "draft model: empty history");
  const int64_t vocab = model_.config().vocab_size;
  // The state must hold every token but the last, which the first draft step feeds.
  const size_t context = history.size() - 1;
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
  if (common < context) {
    const std::vector<int32_t> missing(history.begin() + int64_t(common), history.begin() + int64_t(context));
    model_.forward(missing, *state_, false);
    held_.insert(held_.end(), missing.begin(), missing.end());
  }
  std::vector<int32_t> drafts;
  int32_t last = history.back();
  for (int64_t i = 0; i < max; ++i) {
    const Tensor logits = model_.forward({last}, *state_, false);
    held_.push_back(last);
    const int32_t next = argmax({logits.data<float>(), size_t(vocab)});
    drafts.push_back(next);
    last = next;
  }
  return drafts;
}

}  // namespace fathom
