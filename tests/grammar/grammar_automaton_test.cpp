#include <gtest/gtest.h>

#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar_test_util.h"

namespace fathom::grammar {
namespace {

using testing::accepts;

Grammar one_rule(const std::function<Element(Grammar&)>& body) {
  Grammar g;
  const Element e = body(g);
  const uint32_t root = g.add_rule("root");
  g.add_alternative(root, {e});
  g.set_root(root);
  return g;
}

TEST(GrammarAutomaton, LiteralAcceptsExactlyItself) {
  Grammar g = one_rule([](Grammar& g) { return g.choice({g.literal("null"), g.literal("nu")}); });
  GrammarAutomaton a(g);
  EXPECT_TRUE(accepts(a, "null"));
  EXPECT_TRUE(accepts(a, "nu"));
  EXPECT_FALSE(accepts(a, "n"));
  EXPECT_FALSE(accepts(a, "nulll"));
  EXPECT_FALSE(accepts(a, ""));
  EXPECT_EQ(a.walk(a.initial(), "x"), GrammarAutomaton::kDead);
}

TEST(GrammarAutomaton, RepetitionLoopsOnOneState) {
  // "a" [b-z]* "!" : a thousand letters must not make a thousand states.
  Grammar g = one_rule([](Grammar& g) {
    ByteSet letters;
    for (int c = 'b'; c <= 'z'; ++c) letters.set(size_t(c));
    return g.choice({{g.byte('a'), g.star({g.bytes(letters)}), g.byte('!')}});
  });
  GrammarAutomaton a(g);
  std::string text = "a" + std::string(1000, 'q') + "!";
  EXPECT_TRUE(accepts(a, text));
  EXPECT_LE(a.states(), 4u);
  EXPECT_FALSE(accepts(a, "aqa!"));
}

TEST(GrammarAutomaton, BoundedRepetitionCounts) {
  Grammar g = one_rule([](Grammar& g) { return g.repeat({g.byte('x')}, 2, 4); });
  GrammarAutomaton a(g);
  for (int n = 0; n <= 6; ++n) EXPECT_EQ(accepts(a, std::string(size_t(n), 'x')), n >= 2 && n <= 4) << n;
  Grammar open = one_rule([](Grammar& g) { return g.repeat({g.byte('x')}, 3, -1); });
  GrammarAutomaton b(open);
  for (int n = 0; n <= 40; ++n) EXPECT_EQ(accepts(b, std::string(size_t(n), 'x')), n >= 3) << n;
}

TEST(GrammarAutomaton, NullableRepetitionEnds) {
  // (a?)* has an ε-cycle; building its states must terminate.
  Grammar g = one_rule([](Grammar& g) { return g.star({g.optional({g.byte('a')})}); });
  GrammarAutomaton a(g);
  EXPECT_TRUE(accepts(a, ""));
  EXPECT_TRUE(accepts(a, "aaaa"));
  EXPECT_FALSE(accepts(a, "ab"));
}

TEST(GrammarAutomaton, RecursionNestsAndLeftRecursionIsRefused) {
  // balanced ::= "(" balanced ")" | ε
  Grammar g;
  const uint32_t r = g.add_rule("balanced");
  g.add_alternative(r, {g.byte('('), Grammar::ref(r), g.byte(')')});
  g.add_alternative(r, {});
  g.set_root(r);
  GrammarAutomaton a(g);
  EXPECT_TRUE(accepts(a, "((()))"));
  EXPECT_FALSE(accepts(a, "(()"));
  EXPECT_FALSE(accepts(a, "())"));

  Grammar left;
  const uint32_t l = left.add_rule("left");
  left.add_alternative(l, {Grammar::ref(l), left.byte('x')});
  left.add_alternative(l, {left.byte('x')});
  left.set_root(l);
  EXPECT_THROW(GrammarAutomaton{left}, Error);
}

TEST(GrammarAutomaton, CodePointRangesEncodeUtf8) {
  // U+00E9 é, U+4E2D 中, U+1F600 😀 inside; U+0041 A outside.
  Grammar g = one_rule([](Grammar& g) { return g.code_point_ranges({{0xC0, 0x10FFFF}}); });
  GrammarAutomaton a(g);
  EXPECT_TRUE(accepts(a, "\xC3\xA9"));
  EXPECT_TRUE(accepts(a, "\xE4\xB8\xAD"));
  EXPECT_TRUE(accepts(a, "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(accepts(a, "A"));
  EXPECT_FALSE(accepts(a, "\xED\xA0\x80"));  // a surrogate is not a scalar value
  EXPECT_FALSE(accepts(a, "\xC0\x80"));      // overlong
  // Every scalar value in a sampled set round-trips exactly.
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const char32_t lo = std::uniform_int_distribution<char32_t>(0, 0x10FFFF)(rng);
    const char32_t hi = std::min<char32_t>(0x10FFFF, lo + std::uniform_int_distribution<char32_t>(0, 5000)(rng));
    Grammar r = one_rule([&](Grammar& g) { return g.code_points(lo, hi); });
    GrammarAutomaton b(r);
    for (int k = 0; k < 4; ++k) {
      const char32_t c = std::uniform_int_distribution<char32_t>(lo > 8 ? lo - 8 : 0, hi + 8)(rng);
      if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) continue;
      std::string bytes;
      if (c < 0x80) bytes = {char(c)};
      else if (c < 0x800) bytes = {char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))};
      else if (c < 0x10000) bytes = {char(0xE0 | (c >> 12)), char(0x80 | ((c >> 6) & 0x3F)), char(0x80 | (c & 0x3F))};
      else
        bytes = {char(0xF0 | (c >> 18)), char(0x80 | ((c >> 12) & 0x3F)), char(0x80 | ((c >> 6) & 0x3F)),
                 char(0x80 | (c & 0x3F))};
      const bool inside = c >= lo && c <= hi && !(c >= 0xD800 && c <= 0xDFFF);
      EXPECT_EQ(accepts(b, bytes), inside) << std::hex << "U+" << uint32_t(c) << " in [" << uint32_t(lo) << ", " << uint32_t(hi) << "]";
    }
  }
}

TEST(GrammarAutomaton, HugeRepetitionIsRefusedWithAMessage) {
  Grammar g;
  EXPECT_THROW(g.repeat({g.byte('x')}, 0, int64_t(Grammar::kMaxElements) + 1), Error);
}

}  // namespace
}  // namespace fathom::grammar
