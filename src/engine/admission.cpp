#include "engine/admission.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

MemoryAdmission::MemoryAdmission(const MemoryContract& contract, const PrefillPolicy& policy, int64_t budget,
                                 int64_t fixed)
    : contract_(contract), policy_(policy), budget_(budget), fixed_(fixed) {
  check(budget > 0 && fixed >= 0, "admission: budget ", budget, " and fixed bytes ", fixed, " must be positive");
}

int64_t MemoryAdmission::sequence_bytes(int64_t tokens) const {
  check(tokens > 0, "admission: a sequence of ", tokens, " tokens");
  // A prompt as long as the whole sequence gets the largest chunk the policy gives it.
  const int64_t chunk = policy_.chunk_size(tokens, tokens);
  return contract_.kv_bytes(tokens, chunk) + contract_.transient_bytes(chunk, tokens) +
         contract_.speculation_sequence_bytes(tokens, chunk);
}

int64_t MemoryAdmission::longest_sequence(int64_t limit) const {
  if (limit < 1 || !fits_alone(1)) return 0;
  if (fits_alone(limit)) return limit;
  int64_t lo = 1, hi = limit;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits_alone(mid) ? lo : hi) = mid;
  }
  return lo;
}

bool MemoryAdmission::try_admit(int64_t bytes) {
  std::lock_guard lock(mutex_);
  if (fixed_ + admitted_ + bytes > budget_) return false;
  admitted_ += bytes;
  return true;
}

void MemoryAdmission::release(int64_t bytes) {
  std::lock_guard lock(mutex_);
  admitted_ = std::max<int64_t>(0, admitted_ - bytes);
}

int64_t MemoryAdmission::admitted() const {
  std::lock_guard lock(mutex_);
  return admitted_;
}

}  // namespace fathom
