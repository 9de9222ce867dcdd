#pragma once
// UTF-8 helpers shared by the tokenizer pieces: validation, code-point iteration,
// and the lossy conversion Rust's String::from_utf8_lossy performs (the decoders of
// Hugging Face tokenizers use it, so fathom must replace bad bytes the same way).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace fathom::tok {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Appends the UTF-8 encoding of cp (which must be a Unicode scalar value).
void append_utf8(std::string& out, char32_t cp);

// Decodes the code point starting at s[pos], which must begin a valid sequence of a
// valid UTF-8 string; advances pos past it.
char32_t next_code_point(std::string_view s, size_t& pos);

// Length in bytes of the longest valid UTF-8 sequence at s[pos], or 0 if none starts there.
size_t valid_sequence_length(std::string_view s, size_t pos);

// The byte offset of the first byte that is not part of valid UTF-8, if any.
std::optional<size_t> first_invalid_utf8(std::string_view s);

// Every maximal invalid subpart becomes one U+FFFD, exactly as Rust's from_utf8_lossy.
std::string utf8_lossy(std::string_view bytes);

// Number of code points in a valid UTF-8 string.
size_t code_point_count(std::string_view s);

}  // namespace fathom::tok
