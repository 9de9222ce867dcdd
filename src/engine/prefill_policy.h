#pragma once
// How a prompt is split into prefill chunks. Chunking bounds the transient
// memory of a step and never changes results beyond rounding.
#include <cstdint>
#include <optional>

#include "engine/memory_contract.h"

namespace fathom {

class PrefillPolicy {
 public:
  virtual ~PrefillPolicy() = default;
  // Tokens per chunk (> 0) for a prompt of `prompt_tokens` in a sequence that
  // may grow to `sequence_tokens`.
  virtual int64_t chunk_size(int64_t prompt_tokens, int64_t sequence_tokens) const = 0;
};

// One chunk size for every prompt (--prefill-chunk N forces it).
class FixedPrefillPolicy final : public PrefillPolicy {
 public:
  static constexpr int64_t kDefaultChunk = 512;
  explicit FixedPrefillPolicy(int64_t chunk = kDefaultChunk);
  int64_t chunk_size(int64_t prompt_tokens, int64_t sequence_tokens) const override;

 private:
  int64_t chunk_;
};

// The chunk the memory contract allows: the largest in [kMinPrefillChunk,
// max_prefill_chunk(the contract's device)] whose step fits in what the
// budget leaves after the weights and the KV of `sequences` sequences of
// `context` tokens. Below the least a matmul no longer keeps the cores busy;
// above the most prefill gets no faster (bench/RESULTS.md) and only costs
// memory. Empty when not even the least fits.
inline constexpr int64_t kMinPrefillChunk = 32;
// On the CPU, 512 (larger chunks gain nothing there); on a GPU, 2,048: the
// 8B shape's prefill of 2,048 tokens ran 21% faster in one chunk than in
// four of 512 on an H200 (larger GEMMs, a quarter of the launches).
int64_t max_prefill_chunk(Device device);
std::optional<int64_t> largest_fitting_chunk(const MemoryContract& contract, int64_t budget, int64_t context,
                                             int64_t sequences = 1);

// Picks each request's chunk with largest_fitting_chunk for one sequence of
// sequence_tokens; a sequence that cannot fit at all gets kMinPrefillChunk
// (admission refuses it before it runs).
class BudgetPrefillPolicy final : public PrefillPolicy {
 public:
  BudgetPrefillPolicy(const MemoryContract& contract, int64_t budget) : contract_(contract), budget_(budget) {}
  int64_t chunk_size(int64_t prompt_tokens, int64_t sequence_tokens) const override;

 private:
  const MemoryContract& contract_;
  int64_t budget_;
};

}  // namespace fathom
