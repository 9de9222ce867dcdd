#pragma once
// One sequence's state: a layer per model layer (KV for attention layers that
// own their cache, a recurrent state for linear-attention layers), and the
// speculative transaction over all of them. A verify step writes drafted
// positions into every layer; resolve keeps exactly the accepted prefix.
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_layer.h"
#include "kv/recurrent_state.h"

namespace fathom {

struct SequenceState {
  // kv[i]: null for Gemma 4's KV-shared layers (they read kv[kv_source_layer[i]])
  // and for linear-attention layers; recurrent[i]: null except for those.
  std::vector<std::unique_ptr<KvLayer>> kv;
  std::vector<std::unique_ptr<RecurrentState>> recurrent;
  int64_t capacity = 0;  // tokens the sequence may hold
  // Longest step forward() hands an architecture at once: sliding-window
  // layers keep only window - 1 + this many rows.
  int64_t max_step = INT64_MAX;

  int64_t length() const { return length_; }
  int64_t bytes() const;
  // False once a transaction failed: the state was dropped and the sequence must end.
  bool valid() const { return valid_; }
  // Whether any layer is recurrent (linear attention): such a state cannot be trimmed back.
  bool has_recurrent_layers() const;
  // Forgets positions >= new_length. Recurrent layers cannot go back, so with
  // them only new_length == length() (nothing to do) or 0 (reset) is allowed.
  void trim(int64_t new_length);
  // The same sequence for `capacity` tokens: KV layers share their blocks
  // (copied when either side writes into one), recurrent states are copied.
  // Not during a speculative step.
  std::unique_ptr<SequenceState> fork(int64_t capacity) const;
  // After every chunk or decode step of `tokens` tokens: advances the length
  // and lets layers with a delayed start convert (not inside a transaction:
  // only committed rows convert, at resolve).
  void end_step(int64_t tokens);

  // --- The speculative transaction ---
  // Whether a verify step of `rows` positions (the pending token and its
  // drafts) can be written and undone: it must fit the capacity, be one step
  // (a sliding window keeps only window - 1 + max_step rows, so a longer step
  // would drop rows a rollback needs), and not cross a delayed quantization
  // start (queries past it must see the converted cache, as without drafts).
  bool can_begin(int64_t rows) const;
  // Most rows a verify step may take now (0 when none); can_begin(n) holds for 1 ≤ n ≤ this.
  int64_t max_verify_rows() const;
  // Opens the step: recurrent layers start keeping their state after each
  // position (they cannot be trimmed back afterwards).
  void begin(int64_t rows);
  // Keeps the first `kept` (1 ≤ kept ≤ rows) of the verify step's positions in
  // every layer: KV layers truncate, recurrent layers take their state after
  // position `kept`. A failure invalidates the sequence (its state is
  // dropped) and throws.
  void resolve(int64_t kept);
  bool in_transaction() const { return open_; }

 private:
  void invalidate();

  int64_t length_ = 0;
  bool valid_ = true;
  bool open_ = false;
  int64_t begin_length_ = 0, rows_ = 0;
};

}  // namespace fathom
