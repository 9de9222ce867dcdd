#pragma once
// Runs a Grammar over bytes as a deterministic automaton built lazily: a
// state is the set of parser stacks (pushdown positions, each with a byte set
// on top) that the bytes so far leave alive; a transition is computed the
// first time it is asked for and kept. Grammars made from JSON Schemas visit a
// few hundred states, so after warm-up a byte costs one table lookup — the
// token-mask walk (grammar/grammar_constraint.h) relies on that.
//
// Bytes that every byte set of the grammar treats alike form one class, and
// transitions are kept per class (a JSON grammar has a few dozen classes).
// Tail calls do not grow a stack, so right-recursive repetition (a string's
// characters, a number's digits) loops on one state.
#include <array>
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
  static constexpr int32_t kUnknown = -2;
  // A bound on the states one grammar may make, against grammars that would
  // keep growing stacks (deep recursion driven by the model's output).
  static constexpr size_t kMaxStates = 1 << 16;
  using ByteBits = std::array<uint64_t, 4>;

  explicit GrammarAutomaton(const Grammar& grammar);

  int32_t initial() const { return 0; }
  // The state after `byte`, or kDead.
  int32_t next(int32_t state, uint8_t byte) {
    const int32_t n = next_[size_t(state) * classes_ + class_of_[byte]];
    return n == kUnknown ? compute(state, class_of_[byte]) : n;
  }
  // The state after every byte of `bytes`, or kDead.
  int32_t walk(int32_t state, std::string_view bytes);
  // The input so far is a complete sentence of the grammar.
  bool accepting(int32_t state) const { return states_[size_t(state)].accepting; }
  size_t states() const { return states_.size(); }

  // For the mask walk's inner loop: entry state * classes() + class_of()[byte],
  // kUnknown until next() computes it. Valid until the next new state.
  const int32_t* table() const { return next_.data(); }
  const std::array<uint8_t, 256>& class_of() const { return class_of_; }
  size_t classes() const { return classes_; }

  // The state whose mask stands in for `state`'s: every bounded repetition
  // with more than `horizon` repetitions left is cut to `horizon`, and one
  // with fewer to the power of two below. It allows a subset of what `state`
  // allows (never a token `state` rejects), and the same tokens as long as no
  // token needs more repetitions than it keeps — so states that differ only
  // in a long count share one mask.
  int32_t mask_state(int32_t state, int64_t horizon);

  // A run: the bytes that all lead from `state` to one live state, and how
  // many steps of them in a row (at most `cap`) stay alive with the same
  // bytes leading on. Any string of at most `length` of these bytes is alive.
  struct Run {
    ByteBits bytes{};
    int length = 0;
  };
  const Run& run(int32_t state, int cap);
  // The fewest bytes after which the text from `state` is complete (0 when
  // it is already; kFar when it never can be): for each stack, what its
  // frames still need at the least, from the grammar's shortest expansions.
  static constexpr int kFar = 1 << 30;
  int distance(int32_t state);

  // Where a run's bytes lead from `state` (valid after run()).
  int32_t run_target(int32_t state) const { return runs_[size_t(state)].target; }

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
  // Where a position sits in a countdown chain: chain, repetitions left, offset in its alternative.
  struct CountdownPlace {
    uint32_t chain, left, offset;
  };

  int32_t compute(int32_t state, uint8_t cls);
  void expand(Stack stack, Closure& out, int depth) const;
  int32_t intern(Closure closure);
  void find_run(int32_t state);

  std::vector<Code> code_;
  std::vector<std::vector<uint32_t>> rule_starts_;  // per rule: where each alternative starts
  std::vector<ByteSet> sets_;
  std::array<uint8_t, 256> class_of_{};
  std::vector<uint8_t> representative_;  // a byte of each class
  size_t classes_ = 0;
  std::vector<State> states_;
  std::vector<int32_t> next_;
  std::unordered_map<std::string, int32_t> index_;
  std::vector<std::vector<uint32_t>> chains_;           // countdown chains: rule per repetitions left - 1
  std::unordered_map<uint32_t, CountdownPlace> places_;  // code position → its place in a chain
  std::unordered_map<int64_t, int32_t> mask_states_;     // (state, horizon) → mask state
  struct RunInfo {
    Run run;
    int32_t target = kDead;
    bool found = false;
    int known = -1;  // run.length is exact up to this cap (-1: not computed)
  };
  std::vector<RunInfo> runs_;
  std::vector<int> distance_;  // per state; -1: not computed yet
  std::vector<int> rest_;      // per code position: the fewest bytes to the end of its alternative
};

}  // namespace fathom::grammar
