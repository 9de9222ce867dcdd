#pragma once
// Unicode properties and transformations for the tokenizer, from utf8proc (Debian's
// libutf8proc): normalization forms, lowercasing, and the character classes the Hugging
// Face pipeline asks about. Every input is valid UTF-8.
#include <string>
#include <string_view>

namespace fathom::tok {

enum class NormalForm { NFC, NFD, NFKC, NFKD };

std::string normalize_unicode(std::string_view s, NormalForm form);

// Full lowercase mapping as Rust's str::to_lowercase: İ becomes "i̇", and a capital sigma
// at the end of a word becomes ς.
std::string lowercase(std::string_view s);

// Rust's char::is_whitespace: the White_Space property.
bool is_whitespace(char32_t c);
// Rust's char::is_numeric: general categories Nd, Nl, No.
bool is_numeric(char32_t c);
// A regex \w character: letters, marks, decimal digits, connector punctuation, joiners.
bool is_word_char(char32_t c);
// General category M (Mn, Mc, Me).
bool is_combining_mark(char32_t c);

}  // namespace fathom::tok
