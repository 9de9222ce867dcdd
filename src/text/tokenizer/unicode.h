#pragma once
// Unicode properties and transformations for the tokenizer, from utf8proc (Debian's
// libutf8proc): normalization forms, lowercasing, and the character classes the Hugging
// Face pipeline asks about. Every input is valid UTF-8.
#include <string>
#include <string_view>

namespace fathom::tok {

enum class NormalForm { NFC, NFD, NFKC, NFKD };

std::string normalize_unicode(std::string_view s, NormalForm form);

// Hugging Face's Lowercase: each character through Rust's char::to_lowercase, without
// context, so İ becomes "i̇" and a capital sigma is always σ (never the final ς).
std::string lowercase(std::string_view s);

// Rust's char::is_whitespace: the White_Space property.
bool is_whitespace(char32_t c);
// Rust's char::is_numeric: general categories Nd, Nl, No.
bool is_numeric(char32_t c);
// A regex \w character: letters, marks, decimal digits, connector punctuation, joiners.
bool is_word_char(char32_t c);
// General category M (Mn, Mc, Me).
bool is_combining_mark(char32_t c);
// General category Mn: what Hugging Face's StripAccents removes (after NFD).
bool is_nonspacing_mark(char32_t c);
// General category C (Cc, Cf, Cn, Co, Cs): Rust's unicode_categories is_other, the
// "control" characters BertNormalizer's clean_text drops.
bool is_other(char32_t c);

}  // namespace fathom::tok
