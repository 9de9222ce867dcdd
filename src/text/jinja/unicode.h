#pragma once
// The Unicode behaviour of Python's str that chat templates can reach: code
// point indexing, whitespace, printability (for repr), character classes and
// case mapping. Tables come from Python itself (unicode_tables.cpp).
#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

namespace fathom::jinja::unicode {

struct Range {
  char32_t lo, hi;
};
struct CaseMapping {
  char32_t cp;
  const char* utf8;
};

namespace tables {
extern const Range kNonPrintable[], kSpace[], kAlpha[], kDecimal[], kDigit[], kNumeric[], kLower[], kUpper[], kCased[],
    kCaseIgnorable[];
extern const size_t kNonPrintableSize, kSpaceSize, kAlphaSize, kDecimalSize, kDigitSize, kNumericSize, kLowerSize,
    kUpperSize, kCasedSize, kCaseIgnorableSize;
extern const CaseMapping kUpperMap[], kLowerMap[], kTitleMap[];
extern const size_t kUpperMapSize, kLowerMapSize, kTitleMapSize;
}  // namespace tables

// Whether `s` is well-formed UTF-8 (no surrogates, no overlong forms).
bool valid_utf8(std::string_view s);
bool is_ascii(std::string_view s);
// Decodes well-formed UTF-8 (check valid_utf8 first for untrusted text).
std::u32string decode(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode(std::u32string_view s);
// Number of code points.
size_t length(std::string_view s);

bool is_space(char32_t c);  // str.isspace
bool is_printable(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_alnum(char32_t c);
bool is_lower(char32_t c);
bool is_upper(char32_t c);
bool is_cased(char32_t c);

// Python's str.upper/lower/title/capitalize/swapcase (full case mapping, final sigma).
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
std::string swapcase(std::string_view s);

}  // namespace fathom::jinja::unicode
