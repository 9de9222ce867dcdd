#include "engine/prefill_policy.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

FixedPrefillPolicy::FixedPrefillPolicy(int64_t chunk) : chunk_(chunk) {
  check(chunk > 0, "prefill chunk must be positive, got ", chunk);
}

int64_t FixedPrefillPolicy::chunk_size(int64_t prompt_tokens, int64_t /*sequence_tokens*/) const {
  return std::max<int64_t>(1, std::min(chunk_, prompt_tokens));
}

int64_t max_prefill_chunk(Device device) { return device == Device::cuda ? 2048 : 512; }

std::optional<int64_t> largest_fitting_chunk(const MemoryContract& contract, int64_t budget, int64_t context,
                                             int64_t sequences) {
  auto fits = [&](int64_t chunk) { return contract.predict(context, sequences, chunk).total() <= budget; };
  if (!fits(kMinPrefillChunk)) return std::nullopt;
  // The total grows with the chunk: bisect for the largest that fits.
  int64_t lo = kMinPrefillChunk, hi = max_prefill_chunk(contract.device());
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

int64_t BudgetPrefillPolicy::chunk_size(int64_t prompt_tokens, int64_t sequence_tokens) const {
  const int64_t context = std::max(prompt_tokens, sequence_tokens);
  const int64_t chunk = largest_fitting_chunk(contract_, budget_, context).value_or(kMinPrefillChunk);
  return std::max<int64_t>(1, std::min(chunk, prompt_tokens));
}

}  // namespace fathom
