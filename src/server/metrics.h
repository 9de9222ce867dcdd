#pragma once
// Server metrics, rendered in the Prometheus text format for GET /metrics.
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace fathom::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of `name`.
  void render(const std::string& name, std::string& out) const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // [bounds + 1], the last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& route, int status);
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> generated_tokens{0};
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> running{0};
  std::atomic<int64_t> kv_bytes_in_use{0};
  std::atomic<int64_t> cancelled{0};
  std::atomic<int64_t> drafted_tokens{0};   // speculative decoding: draft tokens verified
  std::atomic<int64_t> accepted_tokens{0};  // of those, kept
  std::atomic<int64_t> prefix_cache_lookups{0};  // requests started
  std::atomic<int64_t> prefix_cache_hits{0};     // of those, started from a cached prefix
  std::atomic<int64_t> prefix_cache_tokens{0};   // prompt tokens those did not prefill
  std::atomic<int64_t> prefix_cache_bytes{0};    // held by the cache's sequences
  Histogram time_to_first_token;
  Histogram inter_token_latency;
  Histogram request_duration;

  // The memory contract's side of /metrics, read when the page is rendered.
  struct MemoryReading {
    int64_t budget = 0;     // --memory-budget
    int64_t predicted = 0;  // the contract's bytes for the model and the admitted work
    int64_t resident = 0;   // the process's resident set, as the kernel counts it
    int64_t tensors = 0;    // bytes held by tensor allocations (weights copies, activations, scratch)
    int64_t reserved = 0;   // address space reserved for KV caches (committed only as written)
    int64_t kv_block_bytes = 0;   // every KV block's size
    int64_t kv_blocks_used = 0;   // blocks the running sequences hold
    int64_t kv_blocks_free = 0;   // blocks the pool keeps for reuse (not resident)
  };
  std::string render(const MemoryReading& memory) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
};

}  // namespace fathom::server
