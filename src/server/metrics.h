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
  Histogram time_to_first_token;
  Histogram inter_token_latency;
  Histogram request_duration;

  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
};

}  // namespace fathom::server
