#pragma once
// Helpers for the grammar tests: run text through an automaton, and walk it
// at random to produce sentences of a grammar.
#include <random>
#include <string>
#include <string_view>

#include "grammar/grammar_automaton.h"

namespace fathom::grammar::testing {

inline bool accepts(GrammarAutomaton& a, std::string_view text) {
  const int32_t s = a.walk(a.initial(), text);
  return s != GrammarAutomaton::kDead && a.accepting(s);
}

// A random sentence: each step picks a live byte at random, and stops with
// probability `stop` wherever the text is complete. Empty when it ran past
// `max_bytes` without ending.
inline std::string random_sentence(GrammarAutomaton& a, std::mt19937_64& rng, double stop = 0.3,
                                   size_t max_bytes = 20000) {
  std::string out;
  int32_t s = a.initial();
  std::vector<uint8_t> live;
  while (out.size() < max_bytes) {
    live.clear();
    for (int b = 0; b < 256; ++b)
      if (a.next(s, uint8_t(b)) != GrammarAutomaton::kDead) live.push_back(uint8_t(b));
    if (a.accepting(s) && (live.empty() || std::uniform_real_distribution<double>(0, 1)(rng) < stop)) return out;
    if (live.empty()) return {};
    // Prefer structure over long runs: a closing byte, when live, gets a fair share.
    uint8_t b = live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng)];
    for (const char close : {'"', '}', ']', ','})
      if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.15 && a.next(s, uint8_t(close)) != GrammarAutomaton::kDead)
        b = uint8_t(close);
    out.push_back(char(b));
    s = a.next(s, b);
  }
  return {};
}

}  // namespace fathom::grammar::testing
