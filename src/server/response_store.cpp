#include "server/response_store.h"

namespace fathom::server {

void ResponseStore::put(const std::string& id, nlohmann::ordered_json items) {
  const size_t bytes = items.dump().size() + id.size();
  if (bytes > max_bytes_) return;
  std::lock_guard lock(mutex_);
  if (const auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    recent_.erase(it->second);
    index_.erase(it);
  }
  recent_.push_front({id, std::move(items), bytes});
  index_[id] = recent_.begin();
  bytes_ += bytes;
  while (recent_.size() > max_responses_ || bytes_ > max_bytes_) {
    bytes_ -= recent_.back().bytes;
    index_.erase(recent_.back().id);
    recent_.pop_back();
  }
}

std::optional<nlohmann::ordered_json> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  recent_.splice(recent_.begin(), recent_, it->second);
  return it->second->items;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return recent_.size();
}

}  // namespace fathom::server
