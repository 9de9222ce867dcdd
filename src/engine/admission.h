#pragma once
// Admission control: the server runs only work the memory contract says fits.
// The fixed part (weights, the process itself) is charged once; each admitted
// sequence is charged its KV at its full length (prompt + max_tokens) and the
// working memory of its steps, and gives them back when it ends.
#include <cstdint>
#include <mutex>

#include "engine/memory_contract.h"
#include "engine/prefill_policy.h"

namespace fathom {

class MemoryAdmission {
 public:
  // `fixed` is what the process holds before any request (the larger of the
  // contract's weights + runtime and what was measured after loading);
  // `policy` is the one the engine prefills with, so each sequence is billed
  // the chunk it will really run.
  MemoryAdmission(const MemoryContract& contract, const PrefillPolicy& policy, int64_t budget, int64_t fixed);

  int64_t budget() const { return budget_; }
  int64_t fixed() const { return fixed_; }
  // What one sequence of `tokens` tokens adds: its KV at its peak and the
  // transient of its largest step, with the chunk the policy picks for it.
  int64_t sequence_bytes(int64_t tokens) const;
  bool fits_alone(int64_t tokens) const { return fixed_ + sequence_bytes(tokens) <= budget_; }
  // The most tokens one sequence may reach alone, up to `limit`; 0 when not even one fits.
  int64_t longest_sequence(int64_t limit) const;

  // Charges `bytes` if they fit beside what is admitted; false otherwise.
  bool try_admit(int64_t bytes);
  void release(int64_t bytes);
  int64_t admitted() const;

 private:
  const MemoryContract& contract_;
  const PrefillPolicy& policy_;
  const int64_t budget_, fixed_;
  mutable std::mutex mutex_;
  int64_t admitted_ = 0;
};

}  // namespace fathom
