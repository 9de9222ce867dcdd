#pragma once
// What a sequence may generate next, beyond its sampling parameters: a
// constraint (a grammar from a JSON Schema or a forced tool call) masks each
// row of logits and follows every token the sequence emits. Speculative
// decoding checks drafts with accept() and takes them back with rollback()
// before verification; verification rows are then masked one by one as the
// accepted tokens are emitted, so every row sees the state after the tokens
// before it.
#include <cstdint>
#include <span>

namespace fathom {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of every token not allowed now to -infinity.
  // `tokens_left`: the tokens this sequence may still emit, this one and its
  // end token included; a constraint may use it to finish in time.
  virtual void mask(std::span<float> logits, int64_t tokens_left) = 0;
  // Moves past `id`; false (and no change) when it is not allowed now.
  virtual bool accept(int32_t id) = 0;
  // Takes back the last `tokens` accepted ones.
  virtual void rollback(int64_t tokens) = 0;
};

}  // namespace fathom
