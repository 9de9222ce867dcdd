#pragma once
// Regular expressions for the tokenizer's Split, Replace and ByteLevel steps, on PCRE2
// (UTF + UCP, JIT-compiled). Patterns are Hugging Face's, written for Oniguruma; where
// the two engines differ on these patterns the class is rewritten to Oniguruma's
// meaning: \s (PCRE2 also matches U+180E) becomes the White_Space property, \w (PCRE2
// takes in No, such as ², and leaves out marks) Alphabetic, marks, Nd, Pc and joiners.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fathom::tok {

class Regex {
 public:
  // `what` names the construct the pattern belongs to, for error messages.
  static Regex compile(std::string_view pattern, std::string_view what);
  // Matches the string literally.
  static Regex literal(std::string_view text, std::string_view what);

  // Every match, left to right, as byte ranges [begin, end). Like Oniguruma's find_iter
  // in Rust: an empty match right where the previous match ended is skipped.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::string what_;
  bool literal_ = false;  // non-empty literal: matched with a plain search
  std::shared_ptr<const Code> code_;
};

// Rewrites \s, \S, \w and \W to their Oniguruma meaning (exposed for tests).
std::string onig_compatible_pattern(std::string_view pattern);

}  // namespace fathom::tok
