#pragma once
// A grammar as a TokenConstraint: CompiledGrammar pairs a grammar's automaton
// with a vocabulary and caches, per automaton state, the set of tokens it
// allows (one trie walk the first time a state is seen); GrammarConstraint is
// one sequence's position in it. Choices of one request share a
// CompiledGrammar, so a state's mask is computed once for all of them.
//
// End ids (the request's stop tokens) are allowed exactly when the text so far
// is complete; once it cannot go on, they are the only tokens allowed. Near
// the end of the token budget only tokens after which the text can still be
// completed (and ended) in time are allowed, so an answer that could fit is
// not cut off mid-JSON by max_tokens; one already behind (its shortest
// completion is longer than the tokens left) may only take tokens that bring
// the end closer. A
// reasoning block (<think>…</think>) passes unconstrained: from the start when
// the prompt opened it, or when the first token opens it; the constraint
// starts after its closing token.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/token_constraint.h"
#include "grammar/grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"

namespace fathom::grammar {

class CompiledGrammar {
 public:
  // Masks kept per grammar; past this, the least recently computed go.
  static constexpr size_t kMaxCachedMasks = 512;
  // A subtree is taken whole when a run covers it: worth asking for subtrees
  // of at least kRunMinTokens tokens, followed at most kRunCap levels.
  static constexpr uint32_t kRunMinTokens = 4;
  static constexpr int kRunCap = 64;
  // Bounded repetitions with more left than this share the mask of this many
  // left (GrammarAutomaton::mask_state): inside a long maxLength string, a
  // token of more than 32 characters is not offered — a subset that keeps
  // the states one string visits to a few dozen.
  static constexpr int64_t kCountHorizon = 32;

  CompiledGrammar(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary);

  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  // Under the lock: the automaton and the cached masks change as states are met.
  std::unique_lock<std::mutex> lock() const { return std::unique_lock(mutex_); }
  GrammarAutomaton& automaton() { return automaton_; }
  // Bit id set when token id may follow `state` (end ids not included); a
  // subset of them where a long repetition count is cut (see
  // GrammarAutomaton::mask_state), which accept() never needs.
  const std::vector<uint64_t>& allowed(int32_t state);
  size_t cached_masks() const { return masks_.size(); }
  // Makes the masks of the states tokens lead to, breadth first from the
  // initial state, until `max_masks` are made or `max_ms` has passed: the
  // work a request would otherwise meet one token at a time, done once when
  // the grammar is compiled. Returns the masks made.
  size_t warm_up(size_t max_masks = kWarmUpMasks, double max_ms = kWarmUpMs);

  // The tokens `state` allows whose text leaves a different distance to
  // completion (GrammarAutomaton::distance) than `needed`, the state's own —
  // a short list next to the tokens that keep it; for finishing in time.
  struct Distances {
    int needed = 0, most = 0;
    std::vector<std::pair<int, int32_t>> off;  // (distance after the token, token)
  };
  const Distances& distances(int32_t state);
  static constexpr size_t kWarmUpMasks = 512;
  static constexpr double kWarmUpMs = 250.0;

 private:
  // Walks `state` and keeps its mask (successors as walk() lists them).
  const std::vector<uint64_t>& make_mask(int32_t state, std::vector<int32_t>* successors);
  // `successors` (optional) gets the states the allowed tokens end in.
  // `off` (optional) gets the tokens whose distance to completion differs from off->needed.
  void walk(int32_t state, std::vector<uint64_t>& bits, std::vector<int32_t>* successors = nullptr,
            Distances* off = nullptr);

  std::shared_ptr<const TokenVocabulary> vocabulary_;
  GrammarAutomaton automaton_;
  mutable std::mutex mutex_;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
  std::unordered_map<int32_t, Distances> distances_;
  std::vector<int32_t> mask_order_;  // states in the order their masks were made
  std::vector<int32_t> depth_states_;
  std::vector<bool> seen_;           // walk(): successors already listed
  std::vector<uint64_t> scratch_;    // distances(): the mask its walk makes
};

// The reasoning block a constrained answer may start with.
struct ReasoningTokens {
  int32_t open = -1, close = -1;
  bool inside = false;    // the prompt opened the block
  bool may_open = false;  // the first generated token may open it
};

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<CompiledGrammar> grammar, std::vector<int32_t> end_ids,
                    ReasoningTokens reasoning = {});

  void mask(std::span<float> logits, int64_t tokens_left) override;
  bool accept(int32_t id) override;
  void rollback(int64_t tokens) override;

  bool active() const { return history_.back() != kInactive; }
  // The constrained text is complete (an end id was accepted).
  bool finished() const { return history_.back() == kFinished; }

 private:
  static constexpr int32_t kInactive = -3, kFinished = -4;
  // How many tokens before the last possible moment the budget check begins.
  static constexpr int64_t kFinishMargin = 64;
  bool is_end(int32_t id) const;
  bool may_open_reasoning() const { return reasoning_.may_open && history_.size() == 1; }
  // Bans the allowed tokens after which the text could not be completed and
  // ended within `tokens_left` (one byte per token at worst).
  void finish_in_time(std::span<float> logits, int32_t state, int64_t tokens_left);

  std::shared_ptr<CompiledGrammar> grammar_;
  std::vector<int32_t> end_ids_;
  ReasoningTokens reasoning_;
  std::vector<float> kept_;     // end ids' logits while mask() runs

  std::vector<int32_t> history_;  // the automaton state after each accepted token; [0]: before any
};

}  // namespace fathom::grammar
