#pragma once
// The budget the memory contract is held to, and the questions `fathom fit`
// and the server ask of it: does this fit, what is the longest context and
// the most sequences that do.
#include <cstdint>
#include <string>

#include "engine/memory_contract.h"

namespace fathom {

// Without --memory-budget: this fraction of the memory the kernel reports
// available (MemAvailable) when the command starts, leaving the rest to the
// page cache and the rest of the machine; on a GPU, of its free memory.
inline constexpr double kDefaultBudgetFraction = 0.9;
// /proc/meminfo's MemAvailable; throws when it cannot be read.
int64_t mem_available_bytes();
// The default budget for the memory the model runs in on `device` (--device).
int64_t default_memory_budget(const std::string& device = "cpu");
// Where that default comes from, for `fit`'s table: "90% of MemAvailable (…)".
std::string default_budget_source(const std::string& device = "cpu");

// The chunk a prefill of a `context`-token sequence runs with: `forced` when
// positive (--prefill-chunk), else the largest that fits the budget beside
// `sequences` sequences (kMinPrefillChunk when none does).
int64_t planned_chunk(const MemoryContract& contract, int64_t budget, int64_t context, int64_t sequences,
                      int64_t forced);

struct FitAnswer {
  MemoryBreakdown breakdown;  // at the asked context and sequences
  int64_t budget = 0;
  bool fits = false;
  int64_t max_context = 0;    // longest context (≤ the model's maximum) that fits for the sequences; 0: none
  int64_t max_sequences = 0;  // most sequences of the context that fit; 0: none
};
FitAnswer fit_memory(const MemoryContract& contract, int64_t context, int64_t sequences, int64_t budget,
                     int64_t forced_chunk = 0);

}  // namespace fathom
