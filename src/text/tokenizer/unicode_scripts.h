#pragma once
// The Unicode Script property of a character, for Hugging Face's UnicodeScripts
// pre-tokenizer. fathom has no script table of its own: PCRE2 (which the regexes use
// anyway) knows every script of its Unicode version, so one anchored alternation of
// \p{Script} classes tells which one a character belongs to.
#include <cstddef>
#include <string_view>

namespace fathom::tok {

// An id for the script of the character at byte `pos` of valid UTF-8 `s`: equal ids mean
// the same script. Scripts newer than PCRE2's Unicode tables read as Unknown.
int unicode_script(std::string_view s, size_t pos);
// The id unicode_script gives Han, Hiragana and Katakana.
int script_id(std::string_view name);

}  // namespace fathom::tok
