#pragma once
// GPT-2's reversible byte <-> printable-character map, used by the ByteLevel
// pre-tokenizer, normalizer and decoder: bytes that are printable Latin-1 map to
// themselves, the other 68 to U+0100 and up.
#include <array>
#include <string>
#include <string_view>

namespace fathom::tok {

// The UTF-8 encoding of the character that stands for each byte.
const std::array<std::string, 256>& byte_to_unicode();

// The byte a character stands for, or -1 if it is not one of the 256.
int unicode_to_byte(char32_t c);

// Maps every byte of `bytes` to its character.
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace fathom::tok
