#include "grammar/grammar.h"

#include <sstream>

#include "core/error.h"

namespace fathom::grammar {

namespace {

// UTF-8 encoding of one scalar value, as bytes.
std::vector<uint8_t> encode(char32_t c) {
  if (c < 0x80) return {uint8_t(c)};
  if (c < 0x800) return {uint8_t(0xC0 | (c >> 6)), uint8_t(0x80 | (c & 0x3F))};
  if (c < 0x10000) return {uint8_t(0xE0 | (c >> 12)), uint8_t(0x80 | ((c >> 6) & 0x3F)), uint8_t(0x80 | (c & 0x3F))};
  return {uint8_t(0xF0 | (c >> 18)), uint8_t(0x80 | ((c >> 12) & 0x3F)), uint8_t(0x80 | ((c >> 6) & 0x3F)),
          uint8_t(0x80 | (c & 0x3F))};
}

// Splits [lo, hi] into ranges whose UTF-8 encodings are products of byte
// ranges (the construction of Russ Cox's RE2 and of utf8-ranges): each
// result is one byte range per position.
void split_utf8(char32_t lo, char32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  if (lo > hi) return;
  if (lo < 0xD800 && hi > 0xDFFF) {  // surrogates are not scalar values
    split_utf8(lo, 0xD7FF, out);
    split_utf8(0xE000, hi, out);
    return;
  }
  if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
  if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
  if (lo > hi) return;
  for (const char32_t edge : {char32_t(0x7F), char32_t(0x7FF), char32_t(0xFFFF)}) {
    if (lo <= edge && hi > edge) {
      split_utf8(lo, edge, out);
      split_utf8(edge + 1, hi, out);
      return;
    }
  }
  const size_t n = encode(lo).size();
  for (size_t i = 1; i < n; ++i) {
    const char32_t m = (char32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, out);
        split_utf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, out);
        split_utf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  const auto a = encode(lo), b = encode(hi);
  std::vector<std::pair<uint8_t, uint8_t>> ranges;
  for (size_t i = 0; i < n; ++i) ranges.emplace_back(a[i], b[i]);
  out.push_back(std::move(ranges));
}

}  // namespace

void Grammar::count(size_t n) {
  elements_ += n;
  check(elements_ <= kMaxElements, "grammar: the constraint unrolls into more than ", kMaxElements,
        " elements; use smaller bounds (maxLength, maxItems, repetition counts)");
}

uint32_t Grammar::add_rule(std::string name) {
  rules_.push_back({std::move(name), {}});
  return uint32_t(rules_.size() - 1);
}

void Grammar::add_alternative(uint32_t rule, Sequence sequence) {
  check(rule < rules_.size(), "grammar: no rule ", rule);
  count(sequence.size() + 1);
  rules_[rule].alternatives.push_back(std::move(sequence));
}

Element Grammar::bytes(const ByteSet& set) {
  // Interned: the automaton compares elements by index.
  const auto [it, added] = byte_set_index_.try_emplace(set, uint32_t(byte_sets_.size()));
  if (added) byte_sets_.push_back(set);
  return {Element::Kind::bytes, it->second};
}

Element Grammar::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

Sequence Grammar::literal(std::string_view text) {
  Sequence seq;
  for (const char c : text) seq.push_back(byte(uint8_t(c)));
  return seq;
}

Element Grammar::choice(std::vector<Sequence> alternatives, std::string name) {
  if (alternatives.size() == 1 && alternatives[0].size() == 1) return alternatives[0][0];
  const uint32_t r = add_rule(std::move(name));
  for (auto& a : alternatives) add_alternative(r, std::move(a));
  return ref(r);
}

Element Grammar::optional(Sequence sequence) { return choice({std::move(sequence), {}}, "optional"); }

Element Grammar::star(Sequence sequence) {
  // Right recursion: the automaton's tail calls keep its stack flat.
  const uint32_t r = add_rule("star");
  sequence.push_back(ref(r));
  add_alternative(r, std::move(sequence));
  add_alternative(r, {});
  return ref(r);
}

Element Grammar::plus(Sequence sequence) {
  Sequence once = sequence;
  once.push_back(star(std::move(sequence)));
  return choice({std::move(once)}, "plus");
}

Element Grammar::repeat(const Sequence& sequence, int64_t min, int64_t max) {
  check(min >= 0 && (max < 0 || max >= min), "grammar: repetition {", min, ",", max, "} is empty");
  check(min <= int64_t(kMaxElements) && max <= int64_t(kMaxElements), "grammar: repetition {", min, ",", max,
        "} is too large");
  Sequence out;
  for (int64_t i = 0; i < min; ++i) {
    count(sequence.size());
    out.insert(out.end(), sequence.begin(), sequence.end());
  }
  if (max < 0) {
    out.push_back(star(sequence));
  } else if (max > min) {
    // tail_k matches up to k more: tail_k → sequence tail_{k-1} | ε.
    Countdown chain;
    Element tail = optional(sequence);
    chain.rules.push_back(tail.index);
    for (int64_t k = 2; k <= max - min; ++k) {
      Sequence more = sequence;
      more.push_back(tail);
      tail = optional(std::move(more));
      chain.rules.push_back(tail.index);
    }
    out.push_back(tail);
    if (chain.rules.size() >= 2) countdowns_.push_back(std::move(chain));
  }
  if (out.size() == 1) return out[0];
  const uint32_t r = add_rule("repeat");
  add_alternative(r, std::move(out));
  return ref(r);
}

Element Grammar::code_points(char32_t first, char32_t last) { return code_point_ranges({{first, last}}); }

Element Grammar::code_point_ranges(const std::vector<std::pair<char32_t, char32_t>>& ranges) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> split;
  for (const auto& [lo, hi] : ranges) split_utf8(lo, std::min<char32_t>(hi, 0x10FFFF), split);
  check(!split.empty(), "grammar: an empty character class");
  // Sequences of one byte range merge into one byte set.
  ByteSet single;
  std::vector<Sequence> alternatives;
  for (const auto& seq : split) {
    if (seq.size() == 1) {
      for (int b = seq[0].first; b <= seq[0].second; ++b) single.set(size_t(b));
      continue;
    }
    Sequence s;
    for (const auto& [a, b] : seq) {
      ByteSet set;
      for (int x = a; x <= b; ++x) set.set(size_t(x));
      s.push_back(bytes(set));
    }
    alternatives.push_back(std::move(s));
  }
  if (single.any()) alternatives.insert(alternatives.begin(), Sequence{bytes(single)});
  return choice(std::move(alternatives), "char");
}

std::string Grammar::to_string() const {
  std::ostringstream out;
  auto set_text = [&](const ByteSet& s) {
    std::ostringstream t;
    t << '[';
    for (int b = 0; b < 256; ++b) {
      if (!s.test(size_t(b))) continue;
      int e = b;
      while (e + 1 < 256 && s.test(size_t(e + 1))) ++e;
      auto one = [&](int x) {
        if (x >= 0x21 && x < 0x7F && x != ']' && x != '\\' && x != '-') t << char(x);
        else t << "\\x" << "0123456789abcdef"[x >> 4] << "0123456789abcdef"[x & 15];
      };
      one(b);
      if (e > b) {
        t << '-';
        one(e);
      }
      b = e;
    }
    t << ']';
    return t.str();
  };
  for (size_t r = 0; r < rules_.size(); ++r) {
    out << (r == root_ ? "*" : "") << rules_[r].name << r << " ::=";
    for (size_t a = 0; a < rules_[r].alternatives.size(); ++a) {
      out << (a ? " |" : "");
      for (const Element& e : rules_[r].alternatives[a])
        out << ' '
            << (e.kind == Element::Kind::bytes ? set_text(byte_sets_[e.index])
                                               : rules_[e.index].name + std::to_string(e.index));
      if (rules_[r].alternatives[a].empty()) out << " ε";
    }
    out << '\n';
  }
  return out.str();
}

}  // namespace fathom::grammar
