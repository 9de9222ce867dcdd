#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace fathom::server {

namespace {
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard lock(mutex_);
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  std::lock_guard lock(mutex_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += name + "_sum " + number(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : time_to_first_token({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      inter_token_latency({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      request_duration({0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}) {}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{route, status}];
}

std::string Metrics::render(const MemoryReading& memory) const {
  std::string out;
  out += "# HELP fathom_requests_total HTTP requests by route and status.\n# TYPE fathom_requests_total counter\n";
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, n] : requests_)
      out += "fathom_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
             std::to_string(n) + "\n";
  }
  auto scalar = [&](const char* name, const char* type, const char* help, int64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(v) + "\n";
  };
  scalar("fathom_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", prompt_tokens.load());
  scalar("fathom_generation_tokens_total", "counter", "Tokens generated.", generated_tokens.load());
  scalar("fathom_requests_cancelled_total", "counter", "Requests cancelled (client gone or timeout).",
         cancelled.load());
  scalar("fathom_spec_draft_tokens_total", "counter", "Speculative decoding: draft tokens verified by the target.",
         drafted_tokens.load());
  scalar("fathom_spec_accepted_tokens_total", "counter", "Speculative decoding: draft tokens the target kept.",
         accepted_tokens.load());
  scalar("fathom_prefix_cache_lookups_total", "counter", "Requests started (each looks in the prefix cache).",
         prefix_cache_lookups.load());
  scalar("fathom_prefix_cache_hits_total", "counter", "Requests that started from a cached prefix.",
         prefix_cache_hits.load());
  scalar("fathom_prefix_cache_tokens_saved_total", "counter", "Prompt tokens taken from the prefix cache, not prefilled.",
         prefix_cache_tokens.load());
  scalar("fathom_prefix_cache_bytes", "gauge", "Bytes the prefix cache's sequences hold.", prefix_cache_bytes.load());
  scalar("fathom_queue_depth", "gauge", "Requests waiting for the engine.", queue_depth.load());
  scalar("fathom_requests_running", "gauge", "Requests the engine is running.", running.load());
  scalar("fathom_kv_cache_bytes_in_use", "gauge", "KV-cache bytes held by running sequences.", kv_bytes_in_use.load());
  scalar("fathom_memory_budget_bytes", "gauge", "The memory budget admission holds the server to.", memory.budget);
  scalar("fathom_memory_predicted_bytes", "gauge",
         "Bytes the memory contract predicts for the model and the admitted requests.", memory.predicted);
  scalar("fathom_memory_resident_bytes", "gauge", "Resident memory of the process (VmRSS).", memory.resident);
  scalar("fathom_memory_tensor_bytes", "gauge", "Bytes held by tensor allocations.", memory.tensors);
  scalar("fathom_kv_block_bytes", "gauge", "Bytes of one KV block (every layer and format takes blocks of this size).",
         memory.kv_block_bytes);
  scalar("fathom_kv_blocks_used", "gauge", "KV blocks held by sequences.", memory.kv_blocks_used);
  scalar("fathom_kv_blocks_free", "gauge", "KV blocks the pool keeps for reuse (address space only, not resident).",
         memory.kv_blocks_free);
  scalar("fathom_memory_kv_reserved_bytes", "gauge",
         "Address space reserved for KV caches; pages are committed as rows are written.", memory.reserved);
  auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    h.render(name, out);
  };
  histogram("fathom_time_to_first_token_seconds", "From arrival to the first generated token.", time_to_first_token);
  histogram("fathom_inter_token_latency_seconds", "Between consecutive generated tokens.", inter_token_latency);
  histogram("fathom_request_duration_seconds", "From arrival to the end of generation.", request_duration);
  return out;
}

}  // namespace fathom::server
