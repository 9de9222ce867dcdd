#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <regex>

#include "core/error.h"
#include "grammar/regex_grammar.h"
#include "grammar_test_util.h"
#include "text/tokenizer/utf8.h"

namespace fathom::grammar {
namespace {

using testing::accepts;

Grammar pattern_grammar(const std::string& pattern) {
  Grammar g;
  const Element e = regex_to_grammar(g, pattern);
  const uint32_t root = g.add_rule("root");
  g.add_alternative(root, {e});
  g.set_root(root);
  return g;
}

// std::regex works on bytes; wide strings (UTF-32 here) match code points, as JSON Schema's patterns do.
std::wstring wide(const std::string& s) {
  std::wstring out;
  for (size_t i = 0; i < s.size();) out.push_back(wchar_t(tok::next_code_point(s, i)));
  return out;
}

// The JSON string body (no quotes) of `s`.
std::string encoded(const std::string& s) {
  const std::string quoted = nlohmann::json(s).dump();
  return quoted.substr(1, quoted.size() - 2);
}

const char* const kPatterns[] = {
    "^[a-z]+$",
    "^\\d{3}-\\d{4}$",
    "[A-Z][a-z]{1,5}( [A-Z][a-z]{1,5})?",
    "^(foo|bar|ba)*x?$",
    "^[^0-9\"]{2,}$",
    "^a.c$",
    "^\\w+@\\w+\\.(com|org)$",
    "^(\\+|-)?\\d+(\\.\\d{1,2})?$",
    "^[\\-a\\]]*$",
    "^(?:ab|cd){2,3}$",
    "^\\S\\s\\S$",
    "^x{0}y{2,}$",
    "^[\\x41-\\x43\\u0061]+$",
    "^\"\\\\[a-c-]$",
};

TEST(RegexGrammar, AgreesWithStdRegexOnRandomStrings) {
  std::mt19937_64 rng(11);
  const std::string alphabet = "abcdfoxyrABCZ019-+.@ \"\\]_";
  for (const char* pattern : kPatterns) {
    SCOPED_TRACE(pattern);
    Grammar g = pattern_grammar(pattern);
    GrammarAutomaton a(g);
    const std::wregex re(wide(pattern), std::regex::ECMAScript);
    int matched = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
      for (size_t k = 0; k < n; ++k) s.push_back(alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)]);
      const bool full = std::regex_match(wide(s), re);
      EXPECT_EQ(accepts(a, encoded(s)), full) << "\"" << s << "\"";
      matched += full;
    }
    // Sentences of the grammar decode to strings the regex matches.
    for (int i = 0; i < 200; ++i) {
      const std::string body = testing::random_sentence(a, rng, 0.4, 400);
      if (body.empty() && !accepts(a, "")) continue;
      const std::string decoded = nlohmann::json::parse("\"" + body + "\"").get<std::string>();
      // libstdc++'s \s knows only ASCII spaces; ECMAScript's (and this grammar's) has Unicode ones too.
      const bool ascii = std::all_of(decoded.begin(), decoded.end(), [](char ch) { return uint8_t(ch) < 0x80; });
      if (!ascii && std::string(pattern).find("\\s") != std::string::npos) continue;
      if (!ascii && std::string(pattern).find("\\S") != std::string::npos) continue;
      EXPECT_TRUE(std::regex_match(wide(decoded), re)) << "\"" << decoded << "\"";
    }
  }
}

TEST(RegexGrammar, UnsupportedConstructsAreNamed) {
  for (const auto& [pattern, word] : std::vector<std::pair<std::string, std::string>>{
           {"(a)\\1", "backreferences"},
           {"a(?=b)", "lookaround"},
           {"\\bword", "word boundaries"},
           {"\\p{L}+", "Unicode property"},
           {"a^b", "'^' or '$'"},
           {"(ab", "unclosed"},
           {"[ab", "unclosed"},
           {"*a", "nothing to repeat"}}) {
    try {
      pattern_grammar(pattern);
      ADD_FAILURE() << pattern << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << pattern << ": " << e.what();
    }
  }
}

TEST(RegexGrammar, NonAsciiAndEscapedControls) {
  Grammar g = pattern_grammar("^[é中]\\n\\t$");
  GrammarAutomaton a(g);
  EXPECT_TRUE(accepts(a, "中\\n\\t"));
  EXPECT_TRUE(accepts(a, "é\\n\\t"));
  EXPECT_FALSE(accepts(a, "e\\n\\t"));
  EXPECT_FALSE(accepts(a, "中\n\t"));  // a raw control byte is never JSON string text
}

}  // namespace
}  // namespace fathom::grammar
