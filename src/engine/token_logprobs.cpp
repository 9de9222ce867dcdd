#include "engine/token_logprobs.h"

#include <algorithm>

#include "backend/cpu/kernels.h"
#include "core/error.h"

namespace fathom {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t id, int top_n) {
  const int64_t vocab = int64_t(logits.size());
  check(vocab > 0 && id >= 0 && id < vocab, "token logprobs: id ", id, " outside a vocabulary of ", vocab);
  const double log_total = cpu::best_log_sum_exp()(logits.data(), vocab);
  TokenLogprobs out;
  out.logprob = float(double(logits[size_t(id)]) - log_total);
  if (top_n <= 0) return out;
  // A heap of the best top_n so far with the worst on top. Ids come in
  // increasing order, so a later logit equal to the worst kept one never
  // displaces it (ties go to the lower id), and most logits cost one compare.
  using Entry = std::pair<float, int32_t>;
  const auto better = [](const Entry& a, const Entry& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  const int64_t keep = std::min<int64_t>(top_n, vocab);
  std::vector<Entry> best;
  best.reserve(size_t(keep));
  for (int64_t i = 0; i < keep; ++i) best.emplace_back(logits[size_t(i)], int32_t(i));
  std::make_heap(best.begin(), best.end(), better);
  float worst = best.front().first;
  for (int64_t i = keep; i < vocab; ++i) {
    if (!(logits[size_t(i)] > worst)) continue;
    std::pop_heap(best.begin(), best.end(), better);
    best.back() = {logits[size_t(i)], int32_t(i)};
    std::push_heap(best.begin(), best.end(), better);
    worst = best.front().first;
  }
  std::sort(best.begin(), best.end(), better);
  out.top.reserve(size_t(keep));
  for (const auto& [logit, at] : best) out.top.emplace_back(at, float(double(logit) - log_total));
  return out;
}

}  // namespace fathom
