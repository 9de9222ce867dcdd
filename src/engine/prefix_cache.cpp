#include "engine/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

PrefixCache::PrefixCache(int64_t max_bytes) : max_bytes_(max_bytes) {
  check(max_bytes >= 0, "prefix cache: size must be >= 0 bytes, got ", max_bytes);
}

size_t PrefixCache::usable_prefix(const Entry& entry, const std::vector<int32_t>& prompt) {
  const std::vector<int32_t>& tokens = entry.sequence.tokens;
  const size_t most = prompt.empty() ? 0 : prompt.size() - 1;
  size_t common = 0;
  while (common < tokens.size() && common < most && tokens[common] == prompt[common]) ++common;
  if (entry.recurrent && common != tokens.size()) return 0;
  return common;
}

std::optional<HeldSequence> PrefixCache::lookup(const std::vector<int32_t>& prompt, int64_t capacity) {
  ++clock_;
  Entry* best = nullptr;
  size_t best_prefix = 0;
  for (Entry& entry : entries_) {
    // A fork holds the entry's every token, so an entry longer than the
    // request's capacity cannot serve it; a shorter one with less in common still can.
    if (int64_t(entry.sequence.tokens.size()) > capacity) continue;
    const size_t prefix = usable_prefix(entry, prompt);
    if (prefix > best_prefix) best = &entry, best_prefix = prefix;
  }
  if (!best) return std::nullopt;
  best->used = clock_;
  HeldSequence fork;
  fork.state = best->sequence.state->fork(capacity);
  fork.tokens = best->sequence.tokens;
  return fork;
}

void PrefixCache::checkpoint(const SequenceState& state, const std::vector<int32_t>& prompt, int64_t& last) {
  const int64_t length = state.length();
  if (!state.has_recurrent_layers() || !state.valid() || length / kCheckpointTokens <= last / kCheckpointTokens) return;
  last = length;
  HeldSequence copy;
  copy.state = state.fork(length);
  copy.tokens.assign(prompt.begin(), prompt.begin() + length);
  insert(std::move(copy));
}

void PrefixCache::keep_prompt(const SequenceState& state, const std::vector<int32_t>& prompt) {
  const int64_t keep = int64_t(prompt.size()) - 1;
  if (state.has_recurrent_layers() || !state.valid() || keep <= 0 || state.length() < keep) return;
  HeldSequence copy;
  copy.state = state.fork(state.length());
  try {
    copy.state->trim(keep);
  } catch (const Error&) {
    return;  // a sliding window has dropped rows the trimmed sequence would need
  }
  copy.tokens.assign(prompt.begin(), prompt.begin() + keep);
  insert(std::move(copy));
}

void PrefixCache::insert(HeldSequence sequence) {
  if (!sequence.state || !sequence.state->valid() || sequence.tokens.empty()) return;
  Entry entry;
  entry.bytes = sequence.state->bytes();
  entry.recurrent = sequence.state->has_recurrent_layers();
  entry.used = ++clock_;
  entry.sequence = std::move(sequence);
  if (entry.bytes > max_bytes_) return;
  const std::vector<int32_t>& tokens = entry.sequence.tokens;
  auto extended_by_new = [&](const Entry& old) {
    const auto& t = old.sequence.tokens;
    return !old.recurrent && t.size() <= tokens.size() && std::equal(t.begin(), t.end(), tokens.begin());
  };
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (extended_by_new(*it)) {
      bytes_ -= it->bytes;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  while (bytes_ + entry.bytes > max_bytes_) {
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](const Entry& a, const Entry& b) { return a.used < b.used; });
    bytes_ -= lru->bytes;
    entries_.erase(lru);
  }
  bytes_ += entry.bytes;
  entries_.push_back(std::move(entry));
}

}  // namespace fathom
