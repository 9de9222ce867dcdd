#pragma once
// Runs a Grammar over bytes as a deterministic automaton built lazily: a
// state is the set of parser stacks (pushdown positions, each with a byte set
// on top) that the bytes so far leave alive; a transition is computed the
// first time it is asked for and kept. Grammars made from JSON Schemas visit a
// few hundred states, so after warm-up a byte costs one table lookup — the
// token-mask walk (grammar/token_vocabulary.h) relies on that.
//
// Tail calls do not grow a stack, so right-recursive repetition (a string's
// characters, a number's digits) loops on one state.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace fathom::grammar {

class GrammarAutomaton {
 public:
  static constexpr int32_t kDead = -1;
  // A bound on the states one grammar may make, against grammars that would
  // keep growing stacks (deep recursion driven by the model's output).
  static constexpr size_t kMaxStates = 1 << 16;

  explicit GrammarAutomaton(const Grammar& grammar);

  int32_t initial() const { return 0; }
  // The state after `byte`, or kDead.
  int32_t next(int32_t state, uint8_t byte) {
    const int32_t n = next_[size_t(state) * 256 + byte];
    return n == kUnknown ? compute(state, byte) : n;
  }
  // The state after every byte of `bytes`, or kDead.
  int32_t walk(int32_t state, std::string_view bytes);
  // The input so far is a complete sentence of the grammar.
  bool accepting(int32_t state) const { return states_[size_t(state)].accepting; }
  // Some byte can still follow.
  bool can_continue(int32_t state) const { return !states_[size_t(state)].stacks.empty(); }
  size_t states() const { return states_.size(); }
  // The raw table, for the hot loop of the mask walk: entry state * 256 + byte,
  // kUnknown until next() computes it. Valid until the next new state.
  static constexpr int32_t kUnknown = -2;
  const int32_t* table() const { return next_.data(); }

 private:
  enum class Op : uint8_t { bytes, rule, end };
  struct Code {
    Op op;
    uint32_t index;
  };
  using Stack = std::vector<uint32_t>;  // code positions, bottom to top
  struct State {
    std::vector<Stack> stacks;  // each top is a bytes op; sorted, distinct
    bool accepting = false;
  };
  struct Closure {
    std::vector<Stack> stacks;
    bool accepting = false;
    std::set<Stack> calls;  // stacks already expanded at a call: ends ε-cycles such as (a?)*
  };

  int32_t compute(int32_t state, uint8_t byte);
  void expand(Stack stack, Closure& out, int depth) const;
  int32_t intern(Closure closure);

  std::vector<Code> code_;
  std::vector<std::vector<uint32_t>> rule_starts_;  // per rule: where each alternative starts
  std::vector<ByteSet> sets_;
  std::vector<State> states_;
  std::vector<int32_t> next_;
  std::unordered_map<std::string, int32_t> index_;
};

}  // namespace fathom::grammar
