#pragma once
// How a prompt is split into prefill chunks. Chunking bounds the transient
// memory of a step and never changes results beyond rounding.
#include <cstdint>
#include <memory>

namespace fathom {

class PrefillPolicy {
 public:
  virtual ~PrefillPolicy() = default;
  // Tokens per chunk for a prompt of this length (> 0).
  virtual int64_t chunk_size(int64_t prompt_tokens) const = 0;
};

// The same chunk size for every prompt (the default: 512; --prefill-chunk N).
class FixedPrefillPolicy final : public PrefillPolicy {
 public:
  static constexpr int64_t kDefaultChunk = 512;
  explicit FixedPrefillPolicy(int64_t chunk = kDefaultChunk);
  int64_t chunk_size(int64_t prompt_tokens) const override;

 private:
  int64_t chunk_;
};

}  // namespace fathom
