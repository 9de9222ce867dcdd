#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace fathom::grammar {

CompiledGrammar::CompiledGrammar(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
    : vocabulary_(std::move(vocabulary)), automaton_(grammar) {
  check(vocabulary_ != nullptr, "compiled grammar: no vocabulary");
}

const std::vector<uint64_t>& CompiledGrammar::allowed(int32_t state) {
  if (const auto it = masks_.find(state); it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxCachedMasks) {
    masks_.erase(mask_order_.front());
    mask_order_.erase(mask_order_.begin());
  }
  std::vector<uint64_t> bits(size_t(vocabulary_->size() + 63) / 64, 0);
  walk(state, bits);
  mask_order_.push_back(state);
  return masks_.emplace(state, std::move(bits)).first->second;
}

void CompiledGrammar::walk(int32_t state, std::vector<uint64_t>& bits) {
  // One pass over the trie in preorder: a node's state is its parent's
  // (depth - 1) state moved by its byte; a dead one skips its subtree.
  const auto& nodes = vocabulary_->nodes();
  const auto& ids = vocabulary_->token_ids();
  depth_states_.assign(size_t(vocabulary_->max_depth()) + 1, GrammarAutomaton::kDead);
  depth_states_[0] = state;
  const int32_t* table = automaton_.table();
  size_t i = 0;
  while (i < nodes.size()) {
    const TokenVocabulary::Node& n = nodes[i];
    const int32_t from = depth_states_[n.depth - 1];
    int32_t to = table[size_t(from) * 256 + n.byte];
    if (to == GrammarAutomaton::kUnknown) {
      to = automaton_.next(from, n.byte);
      table = automaton_.table();  // a new state may have moved the table
    }
    if (to == GrammarAutomaton::kDead) {
      i = n.subtree_end;
      continue;
    }
    depth_states_[n.depth] = to;
    for (uint32_t t = n.tokens_begin; t < n.tokens_end; ++t) {
      const auto id = uint32_t(ids[t]);
      bits[id >> 6] |= uint64_t(1) << (id & 63);
    }
    ++i;
  }
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<CompiledGrammar> grammar, std::vector<int32_t> end_ids,
                                     ReasoningTokens reasoning)
    : grammar_(std::move(grammar)), end_ids_(std::move(end_ids)), reasoning_(reasoning) {
  check(grammar_ != nullptr, "grammar constraint: no grammar");
  check(!end_ids_.empty(), "grammar constraint: no end ids (the constrained text could never end)");
  check(!(reasoning_.inside || reasoning_.may_open) || (reasoning_.open >= 0 && reasoning_.close >= 0),
        "grammar constraint: a reasoning block needs its open and close ids");
  history_.push_back(reasoning_.inside ? kInactive : grammar_->automaton().initial());
}

bool GrammarConstraint::is_end(int32_t id) const {
  return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

void GrammarConstraint::mask(std::span<float> logits) {
  const int32_t state = history_.back();
  if (state == kInactive) return;
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  if (state == kFinished) {
    std::fill(logits.begin(), logits.end(), kNever);
    return;
  }
  const auto lock = grammar_->lock();
  const bool can_end = grammar_->automaton().accepting(state);
  const std::vector<uint64_t>& bits = grammar_->allowed(state);
  const size_t n = logits.size();
  // End ids are never grammar text: they keep their logits exactly when the text may end.
  kept_.clear();
  for (const int32_t e : end_ids_) kept_.push_back(size_t(e) < n ? logits[size_t(e)] : kNever);
  const bool may_open = may_open_reasoning() && size_t(reasoning_.open) < n;
  const float open_logit = may_open ? logits[size_t(reasoning_.open)] : kNever;
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t allowed = w < bits.size() ? bits[w] : 0;
    if (allowed == ~uint64_t(0)) continue;
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i)
      if (!((allowed >> (i & 63)) & 1)) logits[i] = kNever;
  }
  for (size_t e = 0; e < end_ids_.size(); ++e) {
    const auto id = size_t(end_ids_[e]);
    if (id < n) logits[id] = can_end ? kept_[e] : kNever;
  }
  if (may_open) logits[size_t(reasoning_.open)] = open_logit;
}

bool GrammarConstraint::accept(int32_t id) {
  const int32_t state = history_.back();
  if (state == kInactive) {
    history_.push_back(id == reasoning_.close ? grammar_->automaton().initial() : kInactive);
    return true;
  }
  if (may_open_reasoning() && id == reasoning_.open) {
    history_.push_back(kInactive);
    return true;
  }
  if (state == kFinished) return false;
  const auto lock = grammar_->lock();
  GrammarAutomaton& automaton = grammar_->automaton();
  if (is_end(id)) {
    if (!automaton.accepting(state)) return false;
    history_.push_back(kFinished);
    return true;
  }
  const std::string& bytes = grammar_->vocabulary().bytes(id);
  if (bytes.empty()) return false;
  const int32_t next = automaton.walk(state, bytes);
  if (next == GrammarAutomaton::kDead) return false;
  history_.push_back(next);
  return true;
}

void GrammarConstraint::rollback(int64_t tokens) {
  check(tokens >= 0 && tokens < int64_t(history_.size()), "grammar constraint: cannot take back ", tokens,
        " tokens of ", history_.size() - 1);
  history_.resize(history_.size() - size_t(tokens));
}

}  // namespace fathom::grammar
