#include "grammar/grammar_automaton.h"

#include <algorithm>

#include "core/error.h"

namespace fathom::grammar {

namespace {

constexpr int kMaxExpansionDepth = 2000;
constexpr size_t kMaxStackDepth = 4096;

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
  // The initial state: the root's alternatives, expanded. The root rule is
  // entered through a one-element sequence so that its end empties the stack.
  const uint32_t entry = uint32_t(code_.size());
  code_.push_back({Op::rule, grammar.root()});
  code_.push_back({Op::end, 0});
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
    const auto& starts = rule_starts_[c.index];
    for (size_t a = 0; a < starts.size(); ++a) {
      Stack s = stack;
      s.push_back(starts[a]);
      expand(std::move(s), out, depth + 1);
    }
    // A tail call whose frame was the last one: the stack is empty when an
    // alternative ends, which expand() above reports as accepting.
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
  next_.resize(states_.size() * 256, kUnknown);
  return it->second;
}

int32_t GrammarAutomaton::compute(int32_t state, uint8_t byte) {
  Closure c;
  for (const Stack& s : states_[size_t(state)].stacks) {
    if (!sets_[code_[s.back()].index].test(byte)) continue;
    Stack moved = s;
    ++moved.back();
    expand(std::move(moved), c, 0);
  }
  const int32_t to = c.stacks.empty() && !c.accepting ? kDead : intern(std::move(c));
  next_[size_t(state) * 256 + byte] = to;
  return to;
}

int32_t GrammarAutomaton::walk(int32_t state, std::string_view bytes) {
  for (const char b : bytes) {
    if (state == kDead) return kDead;
    state = next(state, uint8_t(b));
  }
  return state;
}

}  // namespace fathom::grammar
