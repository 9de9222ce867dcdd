#pragma once
// Speculative decoding: a drafter proposes the next few tokens, one target
// forward verifies them all (the sequence's state runs the step as a
// transaction), and the longest prefix the target itself would have produced
// is kept, plus the target's own next token. Greedy output is the output
// without speculation, token for token.
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"

namespace fathom {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max` tokens to follow `history` (the prompt and every token so far); may be empty.
  virtual std::vector<int32_t> propose(const std::vector<int32_t>& history, int64_t max) = 0;
};

// Prompt lookup: the tokens that followed the most recent earlier occurrence
// of the history's last n tokens (n from max_ngram down to min_ngram).
class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(int64_t max_ngram = 3, int64_t min_ngram = 1);
  std::vector<int32_t> propose(const std::vector<int32_t>& history, int64_t max) override;

 private:
  int64_t max_ngram_, min_ngram_;
};

// A smaller model sharing the target's vocabulary drafts greedily from its
// own state, which follows the accepted history (rolled back to the common
// prefix before each draft).
class ModelDrafter final : public Drafter {
 public:
  // `capacity`: the longest history it will see plus the longest draft.
  ModelDrafter(const Model& draft, int64_t capacity);
  std::vector<int32_t> propose(const std::vector<int32_t>& history, int64_t max) override;

 private:
  const Model& model_;
  int64_t capacity_;
  std::unique_ptr<SequenceState> state_;
  std::vector<int32_t> held_;  // the tokens state_ holds
};

// What speculation did in one generation.
struct SpeculationStats {
  int64_t drafted = 0;        // draft tokens verified
  int64_t accepted = 0;       // of those, kept
  int64_t target_passes = 0;  // target steps after the prompt: verify steps and plain decode steps
  int64_t replays = 0;        // extra target forwards of kept tokens after a partial rejection (recurrent layers)
};

}  // namespace fathom
