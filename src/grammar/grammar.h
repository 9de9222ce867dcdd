#pragma once
// A context-free grammar over bytes, the form every constraint (a JSON Schema,
// a regex, a tool-call format) is compiled into before decoding. A rule is a
// list of alternatives; an alternative is a sequence of elements, each a set of
// bytes or a reference to a rule. Builders below make the usual shapes
// (literals, classes, repetition) out of rules, so the automaton that runs the
// grammar (grammar/grammar_automaton.h) needs to know only these two kinds.
//
// Grammars built here must not be left-recursive (no rule may reach itself
// without consuming a byte): the automaton expands rules eagerly.
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fathom::grammar {

using ByteSet = std::bitset<256>;

struct Element {
  enum class Kind : uint8_t { bytes, rule };
  Kind kind;
  uint32_t index;  // into Grammar::byte_sets() or Grammar::rules()
};

using Sequence = std::vector<Element>;

class Grammar {
 public:
  // The most elements a grammar may hold: a bound against schemas that would
  // unroll into something huge (maxLength: 1e9).
  static constexpr size_t kMaxElements = size_t(1) << 21;

  uint32_t add_rule(std::string name);
  void add_alternative(uint32_t rule, Sequence sequence);
  void set_root(uint32_t rule) { root_ = rule; }
  uint32_t root() const { return root_; }

  Element bytes(const ByteSet& set);
  Element byte(uint8_t b);
  static Element ref(uint32_t rule) { return {Element::Kind::rule, rule}; }

  // Shapes made of rules. Each returns an element that matches the shape.
  Sequence literal(std::string_view text);
  Element choice(std::vector<Sequence> alternatives, std::string name = "choice");
  Element optional(Sequence sequence);
  Element star(Sequence sequence);               // zero or more
  Element plus(Sequence sequence);               // one or more
  // Between min and max repetitions; max < 0 means no upper bound. Throws when
  // the unrolled form would exceed kMaxElements.
  Element repeat(const Sequence& sequence, int64_t min, int64_t max);

  // One Unicode scalar value in [first, last] (UTF-8 encoded), as a choice of
  // byte-set sequences.
  Element code_points(char32_t first, char32_t last);
  // A union of code point ranges.
  Element code_point_ranges(const std::vector<std::pair<char32_t, char32_t>>& ranges);

  struct Rule {
    std::string name;
    std::vector<Sequence> alternatives;
  };
  const std::vector<Rule>& rules() const { return rules_; }
  // The chains bounded repetition unrolls into: rules[k - 1] matches up to k
  // more repetitions (sequence, then rules[k - 2]; or nothing). The automaton
  // may treat a position with k left as one with fewer left (a sub-language).
  struct Countdown {
    std::vector<uint32_t> rules;
  };
  const std::vector<Countdown>& countdowns() const { return countdowns_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  size_t elements() const { return elements_; }

  // Readable form, one rule per line (for tests and error messages).
  std::string to_string() const;

 private:
  void count(size_t n);
  std::vector<Rule> rules_;
  std::vector<Countdown> countdowns_;
  std::vector<ByteSet> byte_sets_;
  std::unordered_map<ByteSet, uint32_t> byte_set_index_;
  size_t elements_ = 0;
  uint32_t root_ = 0;
};

}  // namespace fathom::grammar
