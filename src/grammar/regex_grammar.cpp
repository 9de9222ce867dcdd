#include "grammar/regex_grammar.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "text/tokenizer/utf8.h"

namespace fathom::grammar {

namespace {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;
constexpr char32_t kMaxCodePoint = 0x10FFFF;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) out.back().second = std::max(out.back().second, x.second);
    else out.push_back(x);
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  char32_t next = 0;
  for (const auto& [a, b] : normalize(r)) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (const auto& x : a)
    for (const auto& y : b) {
      const char32_t lo = std::max(x.first, y.first), hi = std::min(x.second, y.second);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  return normalize(out);
}

bool contains(const Ranges& r, char32_t c) {
  return std::any_of(r.begin(), r.end(), [&](const auto& x) { return x.first <= c && c <= x.second; });
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMAScript's WhiteSpace and LineTerminator characters.
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view pattern) : g_(g), source_(pattern) {
    for (size_t i = 0; i < pattern.size();) {
      check(tok::valid_sequence_length(pattern, i) > 0, "pattern: not valid UTF-8");
      text_.push_back(tok::next_code_point(pattern, i));
    }
  }

  Element parse() {
    if (peek('^')) ++pos_;
    Element e = alternation();
    if (peek('$')) ++pos_;
    if (pos_ < text_.size()) unsupported(text_[pos_] == ')' ? "an unbalanced ')'" : "'^' or '$' inside the pattern");
    return e;
  }

 private:
  [[noreturn]] void unsupported(const std::string& what) const {
    fail("pattern \"", source_, "\": ", what, " (at character ", pos_, ") is not supported");
  }
  bool peek(char32_t c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool at_end_of_branch() const { return pos_ >= text_.size() || peek('|') || peek(')') || at_final_dollar(); }
  bool at_final_dollar() const { return peek('$') && pos_ + 1 == text_.size(); }

  Element alternation() {
    std::vector<Sequence> alts;
    alts.push_back(concatenation());
    while (peek('|')) {
      ++pos_;
      alts.push_back(concatenation());
    }
    return g_.choice(std::move(alts), "regex");
  }

  Sequence concatenation() {
    Sequence seq;
    while (!at_end_of_branch()) seq.push_back(quantified());
    return seq;
  }

  Element quantified() {
    Element atom_element = atom();
    for (;;) {
      int64_t min = 0, max = -1;
      if (peek('*')) {
        ++pos_;
      } else if (peek('+')) {
        ++pos_;
        min = 1;
      } else if (peek('?')) {
        ++pos_;
        max = 1;
      } else if (peek('{') && braces(min, max)) {
      } else {
        return atom_element;
      }
      if (peek('?')) ++pos_;  // lazy: the same language
      if (peek('+')) unsupported("a possessive quantifier");
      atom_element = g_.repeat({atom_element}, min, max);
    }
  }

  // {n}, {n,}, {n,m}; false (nothing consumed) when the brace is a literal.
  bool braces(int64_t& min, int64_t& max) {
    size_t p = pos_ + 1;
    auto number = [&](int64_t& out) {
      const size_t start = p;
      out = 0;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9' && p - start < 9) out = out * 10 + (text_[p++] - '0');
      return p > start;
    };
    if (!number(min)) return false;
    max = min;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      if (!number(max)) max = -1;
    }
    if (p >= text_.size() || text_[p] != '}') return false;
    if (max >= 0 && max < min) unsupported("a repetition {n,m} with m < n");
    pos_ = p + 1;
    return true;
  }

  Element atom() {
    const char32_t c = text_[pos_];
    if (c == '(') {
      ++pos_;
      if (peek('?')) {
        ++pos_;
        if (peek(':')) {
          ++pos_;
        } else if (peek('<') && pos_ + 1 < text_.size() && text_[pos_ + 1] != '=' && text_[pos_ + 1] != '!') {
          while (pos_ < text_.size() && text_[pos_] != '>') ++pos_;  // a named group
          ++pos_;
        } else {
          unsupported("lookaround or inline flags '(?'");
        }
      }
      Element e = alternation();
      if (!peek(')')) unsupported("an unclosed '('");
      ++pos_;
      return e;
    }
    if (c == '[') return set(char_class(), true);
    if (c == '.') {
      ++pos_;
      return set(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}), false);
    }
    if (c == '\\') return escape_atom();
    if (c == '*' || c == '+' || c == '?') unsupported("a quantifier with nothing to repeat");
    if (c == '^' || c == '$') unsupported("'^' or '$' inside the pattern");
    ++pos_;
    return set({{c, c}}, true);
  }

  Element escape_atom() {
    ++pos_;
    if (pos_ >= text_.size()) unsupported("a trailing '\\'");
    const char32_t c = text_[pos_];
    if (c == 'b' || c == 'B') unsupported("word boundaries (\\b, \\B)");
    if (c >= '1' && c <= '9') unsupported("backreferences");
    bool positive = true;
    const Ranges r = escape_ranges(positive);
    return set(r, positive);
  }

  // The escape at pos_ (after the '\'); `positive` false for the negated classes.
  Ranges escape_ranges(bool& positive) {
    const char32_t c = text_[pos_++];
    switch (c) {
      case 'd': return kDigit;
      case 'w': return kWord;
      case 's': return kSpace;
      case 'D': positive = false; return complement(kDigit);
      case 'W': positive = false; return complement(kWord);
      case 'S': positive = false; return complement(kSpace);
      case 't': return {{'\t', '\t'}};
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': {
        const char32_t v = hex(2);
        return {{v, v}};
      }
      case 'u': {
        const char32_t v = hex(4);
        return {{v, v}};
      }
      case 'p': case 'P': unsupported("Unicode property classes (\\p{...})");
      case 'k': unsupported("named backreferences");
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) unsupported(std::string("the escape \\") + char(c));
        return {{c, c}};
    }
  }

  char32_t hex(int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      if (pos_ >= text_.size()) unsupported("a short hex escape");
      const char32_t h = text_[pos_];
      const int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
                  : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
      if (d < 0) unsupported("a bad hex escape");
      v = v * 16 + char32_t(d);
    }
    return v;
  }

  Ranges char_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek('^')) {
      negated = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (pos_ < text_.size() && (text_[pos_] != ']' || first)) {
      first = false;
      char32_t lo;
      if (text_[pos_] == '\\') {
        ++pos_;
        if (pos_ >= text_.size()) unsupported("a trailing '\\'");
        bool positive = true;
        const Ranges e = escape_ranges(positive);
        if (e.size() != 1 || e[0].first != e[0].second) {  // \d and friends: no range from them
          r.insert(r.end(), e.begin(), e.end());
          continue;
        }
        lo = e[0].first;
      } else {
        if (text_[pos_] == '[') unsupported("nested or POSIX classes '[' inside a class");
        lo = text_[pos_++];
      }
      char32_t hi = lo;
      if (peek('-') && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        if (text_[pos_] == '\\') {
          ++pos_;
          bool positive = true;
          const Ranges e = escape_ranges(positive);
          if (e.size() != 1 || e[0].first != e[0].second) unsupported("a range ending in a class escape");
          hi = e[0].first;
        } else {
          hi = text_[pos_++];
        }
        if (hi < lo) unsupported("a reversed range in a class");
      }
      r.emplace_back(lo, hi);
    }
    if (!peek(']')) unsupported("an unclosed '['");
    ++pos_;
    last_class_negated_ = negated;
    return negated ? complement(r) : normalize(r);
  }

  // One character of `r`, JSON-encoded. Control characters are written as
  // escapes only where the pattern names them (not for '.' or a negation,
  // where leaving them out still matches).
  Element set(const Ranges& raw, bool positive) {
    const bool named_controls = positive && !std::exchange(last_class_negated_, false);
    const Ranges r = normalize(raw);
    std::vector<Sequence> alts;
    const Ranges plain = intersect(r, {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodePoint}});
    if (!plain.empty()) alts.push_back({g_.code_point_ranges(plain)});
    if (contains(r, '"')) alts.push_back(g_.literal("\\\""));
    if (contains(r, '\\')) alts.push_back(g_.literal("\\\\"));
    if (named_controls) {
      static const std::pair<char32_t, const char*> kShort[] = {
          {'\b', "\\b"}, {'\f', "\\f"}, {'\n', "\\n"}, {'\r', "\\r"}, {'\t', "\\t"}};
      for (char32_t c = 0; c < 0x20; ++c) {
        if (!contains(r, c)) continue;
        std::string escape;
        for (const auto& [k, v] : kShort)
          if (k == c) escape = v;
        if (escape.empty()) escape = std::string("\\u00") + "0123456789abcdef"[c >> 4] + "0123456789abcdef"[c & 15];
        alts.push_back(g_.literal(escape));
      }
    }
    if (alts.empty()) fail("pattern \"", source_, "\": a character class matches nothing a JSON string can hold");
    return g_.choice(std::move(alts), "regex_char");
  }

  Grammar& g_;
  std::string_view source_;
  std::u32string text_;
  size_t pos_ = 0;
  bool last_class_negated_ = false;
};

}  // namespace

Element regex_to_grammar(Grammar& grammar, std::string_view pattern) { return RegexParser(grammar, pattern).parse(); }

}  // namespace fathom::grammar
