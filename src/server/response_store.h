#pragma once
// The Responses API's stored responses, for previous_response_id: each
// response keeps its conversation as items (what came before it, its input
// and its output), bounded in count and in bytes; the least recently used go
// first. Thread-safe.
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace fathom::server {

class ResponseStore {
 public:
  ResponseStore(size_t max_responses = 1024, size_t max_bytes = size_t(64) << 20)
      : max_responses_(max_responses), max_bytes_(max_bytes) {}

  // Keeps `items` under `id`; a conversation larger than the whole store is not kept.
  void put(const std::string& id, nlohmann::ordered_json items);
  std::optional<nlohmann::ordered_json> get(const std::string& id);
  size_t size() const;

 private:
  struct Entry {
    std::string id;
    nlohmann::ordered_json items;
    size_t bytes;
  };
  const size_t max_responses_, max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> recent_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace fathom::server
