#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <unordered_set>
#include <limits>

#include "core/error.h"

namespace fathom::grammar {

CompiledGrammar::CompiledGrammar(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
    : vocabulary_(std::move(vocabulary)), automaton_(grammar) {
  check(vocabulary_ != nullptr, "compiled grammar: no vocabulary");
}

const std::vector<uint64_t>& CompiledGrammar::allowed(int32_t state) {
  // States that differ only in a long repetition count share one mask.
  state = automaton_.mask_state(state, kCountHorizon);
  if (const auto it = masks_.find(state); it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxCachedMasks) {
    masks_.erase(mask_order_.front());
    mask_order_.erase(mask_order_.begin());
  }
  return make_mask(state, nullptr);
}

const std::vector<uint64_t>& CompiledGrammar::make_mask(int32_t state, std::vector<int32_t>* successors) {
  std::vector<uint64_t> bits(size_t(vocabulary_->size() + 63) / 64, 0);
  walk(state, bits, successors);
  mask_order_.push_back(state);
  return masks_.emplace(state, std::move(bits)).first->second;
}

size_t CompiledGrammar::warm_up(size_t max_masks, double max_ms) {
  const auto start = std::chrono::steady_clock::now();
  std::deque<int32_t> queue = {automaton_.initial()};
  std::vector<int32_t> successors;
  std::unordered_set<int32_t> queued = {automaton_.initial()};
  size_t made = 0;
  while (!queue.empty() && made < max_masks && masks_.size() < kMaxCachedMasks &&
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < max_ms) {
    const int32_t state = automaton_.mask_state(queue.front(), kCountHorizon);
    queue.pop_front();
    if (masks_.count(state)) continue;
    successors.clear();
    make_mask(state, &successors);
    ++made;
    for (const int32_t s : successors)
      if (queued.insert(s).second) queue.push_back(s);
  }
  return made;
}

const CompiledGrammar::Distances& CompiledGrammar::distances(int32_t state) {
  if (const auto it = distances_.find(state); it != distances_.end()) return it->second;
  if (distances_.size() >= kMaxCachedMasks) distances_.clear();
  Distances d;
  d.needed = automaton_.distance(state);
  scratch_.assign(size_t(vocabulary_->size() + 63) / 64, 0);  // the walk's mask, not kept
  walk(state, scratch_, nullptr, &d);
  for (const auto& [distance, id] : d.off) d.most = std::max(d.most, distance);
  d.most = std::max(d.most, d.needed);
  return distances_.emplace(state, std::move(d)).first->second;
}

void CompiledGrammar::walk(int32_t state, std::vector<uint64_t>& bits, std::vector<int32_t>* successors,
                           Distances* off) {
  // One pass over the trie in preorder: a node's state is its parent's
  // (depth - 1) state moved by its byte; a dead one skips its subtree, and so
  // does one the parent's run covers (all its tokens are allowed).
  const auto& nodes = vocabulary_->nodes();
  const auto& ids = vocabulary_->token_ids();
  const auto& below = vocabulary_->subtree_bytes();
  depth_states_.assign(size_t(vocabulary_->max_depth()) + 1, GrammarAutomaton::kDead);
  depth_states_[0] = state;
  const auto& class_of = automaton_.class_of();
  size_t classes = automaton_.classes();
  const int32_t* table = automaton_.table();
  if (successors) seen_.assign(automaton_.states() + 1024, false);
  auto reached = [&](int32_t s) {
    if (size_t(s) >= seen_.size()) seen_.resize(size_t(s) + 1024, false);
    if (!seen_[size_t(s)]) {
      seen_[size_t(s)] = true;
      successors->push_back(s);
    }
  };
  auto allow = [&](uint32_t begin, uint32_t end) {
    for (uint32_t t = begin; t < end; ++t) {
      const auto id = uint32_t(ids[t]);
      bits[id >> 6] |= uint64_t(1) << (id & 63);
    }
  };
  size_t i = 0;
  while (i < nodes.size()) {
    const TokenVocabulary::Node& n = nodes[i];
    const int32_t from = depth_states_[n.depth - 1];
    const uint32_t tokens_end = vocabulary_->subtree_tokens_end(i);
    if (tokens_end - n.tokens_begin >= kRunMinTokens && n.height <= kRunCap) {
      const GrammarAutomaton::Run& run = automaton_.run(from, kRunCap);
      table = automaton_.table();  // finding a run may add states
      const auto& b = below[i];
      bool covered = run.length >= n.height && (b[0] & ~run.bytes[0]) == 0 && (b[1] & ~run.bytes[1]) == 0 &&
                     (b[2] & ~run.bytes[2]) == 0 && (b[3] & ~run.bytes[3]) == 0;
      // Listing distances, a subtree is taken whole only when all of it leaves the distance as it is.
      for (int32_t s = from, k = 0; covered && off && k < n.height; ++k) {
        s = automaton_.run_target(s);
        covered = automaton_.distance(s) == off->needed;
      }
      if (covered) {
        allow(n.tokens_begin, tokens_end);
        if (successors)  // the run's states, as deep as the subtree goes
          for (int32_t s = from, k = 0; k < n.height && s != GrammarAutomaton::kDead; ++k) {
            s = automaton_.run_target(s);
            if (s != GrammarAutomaton::kDead) reached(s);
          }
        i = n.subtree_end;
        continue;
      }
    }
    int32_t to = table[size_t(from) * classes + class_of[n.byte]];
    if (to == GrammarAutomaton::kUnknown) {
      to = automaton_.next(from, n.byte);
      table = automaton_.table();  // a new state may have moved the table
    }
    if (to == GrammarAutomaton::kDead) {
      i = n.subtree_end;
      continue;
    }
    depth_states_[n.depth] = to;
    allow(n.tokens_begin, n.tokens_end);
    if (successors && n.tokens_end > n.tokens_begin) reached(to);
    if (off && n.tokens_end > n.tokens_begin) {
      const int d = automaton_.distance(to);
      if (d != off->needed)
        for (uint32_t t = n.tokens_begin; t < n.tokens_end; ++t) off->off.emplace_back(d, ids[t]);
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

void GrammarConstraint::mask(std::span<float> logits, int64_t tokens_left) {
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
    const size_t begin = w * 64, end = std::min(n, begin + 64);
    if (allowed == 0) {
      std::fill(logits.begin() + ptrdiff_t(begin), logits.begin() + ptrdiff_t(end), kNever);
      continue;
    }
    for (uint64_t banned = ~allowed; banned; banned &= banned - 1) {
      const size_t i = begin + size_t(__builtin_ctzll(banned));
      if (i < end) logits[i] = kNever;
    }
  }
  for (size_t e = 0; e < end_ids_.size(); ++e) {
    const auto id = size_t(end_ids_[e]);
    if (id < n) logits[id] = can_end ? kept_[e] : kNever;
  }
  if (may_open) logits[size_t(reasoning_.open)] = open_logit;
  finish_in_time(logits, state, tokens_left);
}

void GrammarConstraint::finish_in_time(std::span<float> logits, int32_t state, int64_t tokens_left) {
  // This token, the bytes still needed after it (one per token at worst), and the end token.
  const int64_t room = tokens_left - 2;
  const int needed = grammar_->automaton().distance(state);
  // Only near the end: a token moves the text at most a few bytes closer.
  if (needed == GrammarAutomaton::kFar || room > needed + kFinishMargin) return;
  const CompiledGrammar::Distances& d = grammar_->distances(state);
  if (room >= d.most) return;
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  if (room >= d.needed) {  // most tokens keep the distance: ban those that add too much
    for (const auto& [distance, id] : d.off)
      if (distance > room && size_t(id) < logits.size()) logits[size_t(id)] = kNever;
    return;
  }
  // Behind: only tokens that bring the end closer — within reach if some
  // are, else any that makes progress (the answer then ends as soon as it can).
  bool reachable = false;
  for (const auto& [distance, id] : d.off)
    reachable = reachable || (distance <= room && size_t(id) < logits.size() && logits[size_t(id)] != kNever);
  const int64_t limit = reachable ? room : int64_t(d.needed) - 1;
  kept_.assign(logits.size(), kNever);
  bool any = false;
  for (const auto& [distance, id] : d.off) {
    if (distance > limit || size_t(id) >= logits.size() || logits[size_t(id)] == kNever) continue;
    kept_[size_t(id)] = logits[size_t(id)];
    any = true;
  }
  for (const int32_t e : end_ids_) {
    if (size_t(e) >= logits.size() || logits[size_t(e)] == kNever) continue;
    kept_[size_t(e)] = logits[size_t(e)];
    any = true;
  }
  // When nothing can finish in time, finishing late beats not going on at all.
  if (any) std::copy(kept_.begin(), kept_.end(), logits.begin());
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
