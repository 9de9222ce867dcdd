#pragma once
// One forward step over many sequences. Each sequence brings a run of
// consecutive tokens starting at its state's length — a decode row, a prefill
// chunk, a speculative verify span — and the rows of all of them go through
// every matmul together, so the weights are read once per step for all.
// Attention and recurrent state stay per sequence. One sequence alone is a
// step of one.
#include <cstdint>
#include <vector>

#include "backend/pick_rule.h"
#include "core/tensor.h"
#include "kv/sequence_state.h"

namespace fathom {

// What a sequence wants back from its rows: nothing (a prefill chunk before
// the last), its last row's logits, every row's (a verify span), or only the
// token picked (Backend::pick_rows) from its last row or greedily from every
// row, where the logits are: a run whose logits no one reads on the host
// never brings a row there.
enum class WantLogits : uint8_t { none, last, all, pick, pick_all };

// What one sequence runs in a step.
struct SequenceStep {
  SequenceState* state = nullptr;
  std::vector<int32_t> ids;
  WantLogits logits = WantLogits::last;
  PickRule pick_rule = {};  // how WantLogits::pick picks (pick_all is greedy)
  int64_t logit_rows() const {
    return logits == WantLogits::all ? int64_t(ids.size()) : logits == WantLogits::last ? 1 : 0;
  }
  int64_t picks() const {
    return logits == WantLogits::pick_all ? int64_t(ids.size()) : logits == WantLogits::pick ? 1 : 0;
  }
};

// What a step gives back, on the host: the logits of the rows wanted whole,
// f32 [Σ logit_rows, vocab], and the picks, i32 [Σ picks]; each sequence's
// in step order.
struct StepOutput {
  Tensor logits, picks;
};

// Where each sequence's rows sit in a step (what model code iterates over).
struct StepLayout {
  struct Segment {
    SequenceState* state = nullptr;
    int64_t row = 0, rows = 0;   // rows [row, row + rows) of the step
    int64_t first_position = 0;  // the position of its first row
  };
  std::vector<Segment> segments;
  std::vector<int32_t> ids;         // every row's token
  std::vector<int64_t> logit_rows;  // the rows whose logits the step returns, in order
  std::vector<int64_t> pick_rows;   // the rows whose picks it returns, in order
  std::vector<PickRule> pick_rules;  // how each of them is picked
  int64_t rows() const { return int64_t(ids.size()); }
};

}  // namespace fathom
