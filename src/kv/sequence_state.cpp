#include "kv/sequence_state.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

int64_t SequenceState::bytes() const {
  int64_t total = 0;
  for (const auto& layer : kv)
    if (layer) total += layer->bytes();
  for (const auto& r : recurrent)
    if (r) total += r->bytes();
  return total;
}

bool SequenceState::has_recurrent_layers() const {
  return std::any_of(recurrent.begin(), recurrent.end(), [](const auto& r) { return bool(r); });
}

void SequenceState::trim(int64_t new_length) {
  check(!open_, "trim: a speculative transaction is open");
  check(new_length >= 0 && new_length <= length_, "trim: new length ", new_length, " outside [0, ", length_, "]");
  if (new_length == length_) return;
  check(!has_recurrent_layers() || new_length == 0, "trim: a recurrent (linear-attention) state cannot go back from ",
        length_, " to ", new_length, " tokens, only to 0");
  for (auto& layer : kv)
    if (layer) layer->trim(new_length);
  for (auto& r : recurrent)
    if (r) r->reset();
  length_ = new_length;
}

std::unique_ptr<SequenceState> SequenceState::fork(int64_t new_capacity) const {
  check(valid_ && !open_, "fork: the sequence is invalid or inside a speculative step");
  check(new_capacity >= length_, "fork: capacity ", new_capacity, " below the ", length_, " tokens held");
  auto copy = std::make_unique<SequenceState>();
  copy->capacity = new_capacity;
  copy->max_step = max_step;
  copy->length_ = length_;
  for (const auto& layer : kv) copy->kv.push_back(layer ? layer->fork(new_capacity) : nullptr);
  for (const auto& r : recurrent) copy->recurrent.push_back(r ? r->clone() : nullptr);
  return copy;
}

void SequenceState::end_step(int64_t tokens) {
  check(valid_, "forward: the sequence was invalidated by a failed speculative step");
  check(tokens > 0 && length_ + tokens <= capacity, "end_step: ", length_, " + ", tokens,
        " tokens exceed the capacity of ", capacity);
  length_ += tokens;
  if (open_) return;  // conversions wait for resolve: only committed rows convert
  for (auto& layer : kv)  // one layer at a time keeps the conversion peak low
    if (layer) layer->end_step();
}

int64_t SequenceState::max_verify_rows() const {
  if (!valid_ || open_) return 0;
  int64_t rows = std::min(max_step, capacity - length_);
  for (const auto& layer : kv)
    if (layer && layer->conversion_at() > length_) rows = std::min(rows, layer->conversion_at() - length_);
  return std::max<int64_t>(0, rows);
}

bool SequenceState::can_begin(int64_t rows) const { return rows >= 1 && rows <= max_verify_rows(); }

void SequenceState::begin(int64_t rows) {
  check(can_begin(rows), "speculative step: cannot verify ", rows, " positions at length ", length_, " (at most ",
        max_verify_rows(), ")");
  try {
    for (auto& r : recurrent)
      if (r) r->begin_step(rows);
  } catch (...) {
    invalidate();
    throw;
  }
  open_ = true;
  begin_length_ = length_;
  rows_ = rows;
}

void SequenceState::resolve(int64_t kept) {
  try {
    check(open_, "speculative resolve: no transaction is open");
    check(kept >= 1 && kept <= rows_, "speculative resolve: keeping ", kept, " of ", rows_, " verified positions");
    check(length_ == begin_length_ + rows_, "speculative resolve: the verify step wrote ", length_ - begin_length_,
          " positions, not ", rows_);
    open_ = false;
    for (auto& r : recurrent)
      if (r) r->resolve_step(kept);
    for (auto& layer : kv)
      if (layer) layer->trim(begin_length_ + kept);
    length_ = begin_length_ + kept;
    for (auto& layer : kv)
      if (layer) layer->end_step();
  } catch (...) {
    invalidate();
    throw;
  }
}

void SequenceState::invalidate() {
  valid_ = false;
  open_ = false;
  for (auto& layer : kv)
    if (layer) layer->trim(0);
  for (auto& r : recurrent)
    if (r) r->reset();
  length_ = 0;
}

}  // namespace fathom
