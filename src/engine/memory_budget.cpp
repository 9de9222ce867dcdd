#include "engine/memory_budget.h"

#include <fstream>
#include <string>

#include "backend/backend.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "engine/prefill_policy.h"

namespace fathom {

int64_t mem_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  long long value = 0;
  while (meminfo >> key >> value >> unit)
    if (key == "MemAvailable:") return int64_t(value) * 1024;
  fail("memory budget: cannot read MemAvailable from /proc/meminfo; give --memory-budget");
}

namespace {

int64_t free_bytes_on(const std::string& device) {
  return parse_device(device).kind == Device::cpu ? mem_available_bytes() : gpu_free_bytes(device);
}

}  // namespace

int64_t default_memory_budget(const std::string& device) {
  return int64_t(double(free_bytes_on(device)) * kDefaultBudgetFraction);
}

std::string default_budget_source(const std::string& device) {
  const std::string pool = parse_device(device).kind == Device::cpu ? "MemAvailable" : "the free memory of " + device;
  return std::to_string(int(kDefaultBudgetFraction * 100)) + "% of " + pool + " (" +
         format_bytes(free_bytes_on(device)) + ")";
}

int64_t planned_chunk(const MemoryContract& contract, int64_t budget, int64_t context, int64_t sequences,
                      int64_t forced) {
  if (forced > 0) return forced;
  return largest_fitting_chunk(contract, budget, context, sequences).value_or(kMinPrefillChunk);
}

FitAnswer fit_memory(const MemoryContract& contract, int64_t context, int64_t sequences, int64_t budget,
                     int64_t forced_chunk) {
  check(budget > 0, "fit: the memory budget must be positive, got ", budget);
  auto total_at = [&](int64_t ctx, int64_t seqs) {
    return contract.predict(ctx, seqs, planned_chunk(contract, budget, ctx, seqs, forced_chunk)).total();
  };
  FitAnswer a;
  a.budget = budget;
  a.breakdown = contract.predict(context, sequences, planned_chunk(contract, budget, context, sequences, forced_chunk));
  a.fits = a.breakdown.total() <= budget;

  // Longest context: the total grows with the context, so bisect.
  const int64_t limit = contract.config().max_position_embeddings;
  if (total_at(1, sequences) <= budget) {
    int64_t lo = 1, hi = limit;
    if (total_at(hi, sequences) <= budget) lo = hi;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (total_at(mid, sequences) <= budget ? lo : hi) = mid;
    }
    a.max_context = lo;
  }
  // Most sequences: each adds its KV; bisect from a bound the KV term gives.
  if (total_at(context, 1) <= budget) {
    const int64_t per_sequence = std::max<int64_t>(1, contract.kv_bytes(context, 1));  // the least it can be
    int64_t lo = 1, hi = std::max<int64_t>(2, budget / per_sequence + 2);
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (total_at(context, mid) <= budget ? lo : hi) = mid;
    }
    a.max_sequences = lo;
  }
  return a;
}

}  // namespace fathom
