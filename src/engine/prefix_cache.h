#pragma once
// Sequences kept after their requests end, so that a later request whose
// prompt starts the same way (a shared system prompt, the conversation so
// far) starts from a fork of one instead of prefilling those tokens again.
// A fork shares the entry's KV blocks (each side copies a block before
// writing into it), so keeping and forking cost no copies of the cache.
// Bounded in bytes: the least recently used entries go first.
#include <cstdint>
#include <list>
#include <optional>
#include <vector>

#include "engine/sequence_run.h"

namespace fathom {

class PrefixCache {
 public:
  explicit PrefixCache(int64_t max_bytes);

  // A fork, for a sequence of `capacity` tokens, of the entry whose tokens
  // share the longest prefix with `prompt`; nothing when none shares a token
  // it can go back to. SequenceRun trims the fork to that prefix (the
  // prompt's last token always runs again). An entry with recurrent layers
  // serves only prompts that extend all of its tokens (its state cannot go back).
  std::optional<HeldSequence> lookup(const std::vector<int32_t>& prompt, int64_t capacity);
  // Keeps a finished sequence, dropping the entries it extends (when they
  // can go back, the new one serves all their prompts) and then the least
  // recently used until it fits. A sequence larger than the cache is dropped.
  void insert(HeldSequence sequence);
  // Keeps a fork of `state`, which holds at least the prompt, trimmed to all
  // of the prompt but its last token (what another run of the same prompt
  // can take, see lookup). Attention layers only: a recurrent state cannot be
  // trimmed, so such a sequence keeps nothing here (its prefill checkpoints serve).
  void keep_prompt(const SequenceState& state, const std::vector<int32_t>& prompt);
  // A state that cannot go back (recurrent layers) serves only prompts that
  // extend all of its tokens, so a long prompt is kept at points along its
  // prefill too: a copy of `state` (sharing its KV blocks) each time the run
  // passes another kCheckpointTokens tokens of it. Call after each step;
  // `last` is the length checkpointed before (updated).
  void checkpoint(const SequenceState& state, const std::vector<int32_t>& prompt, int64_t& last);
  static constexpr int64_t kCheckpointTokens = 512;

  int64_t max_bytes() const { return max_bytes_; }
  int64_t bytes() const { return bytes_; }
  int64_t entries() const { return int64_t(entries_.size()); }

 private:
  struct Entry {
    HeldSequence sequence;
    int64_t bytes = 0;
    bool recurrent = false;
    uint64_t used = 0;  // the lookup clock when it last served or arrived
  };
  // The prefix of `prompt` an entry can give: tokens in common, short of the
  // prompt's last, all or nothing for recurrent layers.
  static size_t usable_prefix(const Entry& entry, const std::vector<int32_t>& prompt);

  int64_t max_bytes_, bytes_ = 0;
  uint64_t clock_ = 0;
  std::list<Entry> entries_;
};

}  // namespace fathom
