#include "grammar/grammar_automaton.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace fathom::grammar {

namespace {

constexpr int kMaxExpansionDepth = 2000;
constexpr size_t kMaxStackDepth = 4096;

bool covers(const GrammarAutomaton::ByteBits& big, const GrammarAutomaton::ByteBits& small) {
  for (size_t w = 0; w < 4; ++w)
    if (small[w] & ~big[w]) return false;
  return true;
}

}  // namespace

GrammarAutomaton::GrammarAutomaton(const Grammar& grammar) : sets_(grammar.byte_sets()) {
  const auto& rules = grammar.rules();
  check(grammar.root() < rules.size(), "grammar automaton: the grammar has no root rule");
  rule_starts_.resize(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const Sequence& alt : rules[r].alternatives) {
      rule_starts_[r].push_back(uint32_t(code_.size()));
      for (const Element& e : alt)
        code_.push_back({e.kind == Element::Kind::bytes ? Op::bytes : Op::rule, e.index});
      code_.push_back({Op::end, 0});
    }
  }
  // Byte classes: bytes with the same membership in every set.
  std::map<std::vector<bool>, uint8_t> class_by_signature;
  for (int b = 0; b < 256; ++b) {
    std::vector<bool> signature(sets_.size());
    for (size_t s = 0; s < sets_.size(); ++s) signature[s] = sets_[s].test(size_t(b));
    const auto [it, added] = class_by_signature.try_emplace(std::move(signature), uint8_t(representative_.size()));
    if (added) representative_.push_back(uint8_t(b));
    class_of_[size_t(b)] = it->second;
  }
  classes_ = representative_.size();
  // Countdown chains: where each position of their first alternatives sits.
  for (const Grammar::Countdown& c : grammar.countdowns()) {
    const auto chain = uint32_t(chains_.size());
    chains_.push_back(c.rules);
    for (size_t k = 0; k < c.rules.size(); ++k) {
      const uint32_t start = rule_starts_[c.rules[k]][0];
      for (uint32_t p = start; code_[p].op != Op::end; ++p) places_[p] = {chain, uint32_t(k + 1), p - start};
    }
  }
  // The initial state: the root's alternatives, expanded. The root rule is
  // entered through a one-element sequence so that its end empties the stack.
  const uint32_t entry = uint32_t(code_.size());
  code_.push_back({Op::rule, grammar.root()});
  code_.push_back({Op::end, 0});
  // The shortest expansion of each rule (a fixed point: rules may recurse),
  // then what each position still needs to the end of its alternative.
  std::vector<int64_t> shortest(rules.size(), kFar);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      for (const Sequence& alt : rules[r].alternatives) {
        int64_t n = 0;
        for (const Element& e : alt) n += e.kind == Element::Kind::bytes ? 1 : shortest[e.index];
        if (n < shortest[r]) {
          shortest[r] = n;
          changed = true;
        }
      }
    }
  }
  rest_.assign(code_.size(), 0);
  for (size_t p = code_.size(); p-- > 0;) {
    if (code_[p].op == Op::end) continue;
    const int64_t self = code_[p].op == Op::bytes ? 1 : shortest[code_[p].index];
    rest_[p] = int(std::min<int64_t>(kFar, self + rest_[p + 1]));
  }
  Closure c;
  expand({entry}, c, 0);
  intern(std::move(c));
}

void GrammarAutomaton::expand(Stack stack, Closure& out, int depth) const {
  check(depth < kMaxExpansionDepth && stack.size() < kMaxStackDepth,
        "grammar automaton: the grammar nests deeper than ", kMaxStackDepth,
        " rules without consuming input (left recursion?)");
  for (;;) {
    const Code c = code_[stack.back()];
    if (c.op == Op::bytes) {
      out.stacks.push_back(std::move(stack));
      return;
    }
    if (c.op == Op::end) {
      stack.pop_back();
      if (stack.empty()) {
        out.accepting = true;
        return;
      }
      continue;  // the parent's top already points past the call
    }
    if (!out.calls.insert(stack).second) return;
    // A call: the return position replaces the top, unless the call is the
    // last element (a tail call), whose frame is simply done.
    const uint32_t ret = stack.back() + 1;
    stack.pop_back();
    if (code_[ret].op != Op::end) stack.push_back(ret);
    for (const uint32_t start : rule_starts_[c.index]) {
      Stack s = stack;
      s.push_back(start);
      expand(std::move(s), out, depth + 1);
    }
    return;
  }
}

int32_t GrammarAutomaton::intern(Closure closure) {
  std::sort(closure.stacks.begin(), closure.stacks.end());
  closure.stacks.erase(std::unique(closure.stacks.begin(), closure.stacks.end()), closure.stacks.end());
  std::string key(1, closure.accepting ? 'a' : 'n');
  for (const Stack& s : closure.stacks) {
    const uint32_t n = uint32_t(s.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof n);
    key.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
  }
  const auto [it, added] = index_.try_emplace(std::move(key), int32_t(states_.size()));
  if (!added) return it->second;
  check(states_.size() < kMaxStates, "grammar automaton: the constraint needs more than ", kMaxStates,
        " parser states (nesting too deep)");
  states_.push_back({std::move(closure.stacks), closure.accepting});
  next_.resize(states_.size() * classes_, kUnknown);
  runs_.resize(states_.size());
  distance_.resize(states_.size(), -1);
  return it->second;
}

int32_t GrammarAutomaton::compute(int32_t state, uint8_t cls) {
  const uint8_t byte = representative_[cls];
  Closure c;
  for (const Stack& s : states_[size_t(state)].stacks) {
    if (!sets_[code_[s.back()].index].test(byte)) continue;
    Stack moved = s;
    ++moved.back();
    expand(std::move(moved), c, 0);
  }
  const int32_t to = c.stacks.empty() && !c.accepting ? kDead : intern(std::move(c));
  next_[size_t(state) * classes_ + cls] = to;
  return to;
}

int32_t GrammarAutomaton::walk(int32_t state, std::string_view bytes) {
  for (const char b : bytes) {
    if (state == kDead) return kDead;
    state = next(state, uint8_t(b));
  }
  return state;
}

int32_t GrammarAutomaton::mask_state(int32_t state, int64_t horizon) {
  if (places_.empty()) return state;
  const int64_t key = (int64_t(state) << 24) | std::min<int64_t>(horizon, (1 << 24) - 1);
  if (const auto it = mask_states_.find(key); it != mask_states_.end()) return it->second;
  Closure c;
  c.accepting = states_[size_t(state)].accepting;
  bool changed = false;
  for (Stack s : states_[size_t(state)].stacks) {
    for (uint32_t& p : s) {
      const auto it = places_.find(p);
      if (it == places_.end()) continue;
      const CountdownPlace& place = it->second;
      uint32_t left = place.left;
      if (int64_t(left) > horizon) {
        left = uint32_t(std::max<int64_t>(horizon, 1));
      } else {
        while (left & (left - 1)) left &= left - 1;  // the power of two at or below
      }
      if (left == place.left) continue;
      p = rule_starts_[chains_[place.chain][left - 1]][0] + place.offset;
      changed = true;
    }
    c.stacks.push_back(std::move(s));
  }
  const int32_t out = changed ? intern(std::move(c)) : state;
  mask_states_[key] = out;
  return out;
}

int GrammarAutomaton::distance(int32_t state) {
  if (distance_[size_t(state)] >= 0) return distance_[size_t(state)];
  const State& s = states_[size_t(state)];
  int64_t best = s.accepting ? 0 : kFar;
  for (const Stack& stack : s.stacks) {
    int64_t d = 0;
    for (const uint32_t p : stack) d += rest_[p];
    best = std::min(best, d);
  }
  distance_[size_t(state)] = int(std::min<int64_t>(best, kFar));
  return distance_[size_t(state)];
}

void GrammarAutomaton::find_run(int32_t state) {
  // The live target most bytes lead to.
  std::map<int32_t, ByteBits> by_target;
  for (int b = 0; b < 256; ++b) {
    const int32_t t = next(state, uint8_t(b));
    if (t != kDead) by_target[t][size_t(b) >> 6] |= uint64_t(1) << (b & 63);
  }
  RunInfo& info = runs_[size_t(state)];
  info.found = true;
  size_t best = 0;
  for (const auto& [target, bytes] : by_target) {
    size_t n = 0;
    for (const uint64_t w : bytes) n += size_t(__builtin_popcountll(w));
    if (n > best) {
      best = n;
      info.target = target;
      info.run.bytes = bytes;
    }
  }
}

const GrammarAutomaton::Run& GrammarAutomaton::run(int32_t state, int cap) {
  if (runs_[size_t(state)].known >= cap) return runs_[size_t(state)].run;
  // Follow the chain while each next state's run bytes cover this one's.
  int length = 0;
  for (int32_t cur = state;;) {
    if (!runs_[size_t(cur)].found) find_run(cur);
    const int32_t target = runs_[size_t(cur)].target;
    if (target == kDead) break;
    ++length;
    if (target == cur || length >= cap) {
      length = cap;  // a loop, or far enough
      break;
    }
    if (!runs_[size_t(target)].found) find_run(target);
    if (!covers(runs_[size_t(target)].run.bytes, runs_[size_t(state)].run.bytes)) break;
    cur = target;
  }
  RunInfo& info = runs_[size_t(state)];
  info.run.length = length;
  info.known = cap;
  return info.run;
}

}  // namespace fathom::grammar
