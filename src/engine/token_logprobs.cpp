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
  // A heap of the best top_n so far with the worst on top: most logits are
  // below its top and cost one comparison.
  using Entry = std::pair<float, int32_t>;
  const auto better = [](const Entry& a, const Entry& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  std::vector<Entry> best;
  const size_t keep = size_t(std::min<int64_t>(top_n, vocab));
  best.reserve(keep);
  for (int64_t i = 0; i < vocab; ++i) {
    const Entry e{logits[size_t(i)], int32_t(i)};
    if (best.size() < keep) {
      best.push_back(e);
      std::push_heap(best.begin(), best.end(), better);
    } else if (better(e, best.front())) {
      std::pop_heap(best.begin(), best.end(), better);
      best.back() = e;
      std::push_heap(best.begin(), best.end(), better);
    }
  }
  std::sort(best.begin(), best.end(), better);
  out.top.reserve(keep);
  for (const auto& [logit, at] : best) out.top.emplace_back(at, float(double(logit) - log_total));
  return out;
}

}  // namespace fathom
