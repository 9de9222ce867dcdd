#pragma once
// Hugging Face's Precompiled normalizer: SentencePiece's compiled character map
// (precompiled_charsmap, base64 in tokenizer.json), as models converted from
// SentencePiece carry it. The map is a darts-clone double-array trie from byte strings
// to offsets into a block of NUL-terminated replacements.
//
// Hugging Face applies it per extended grapheme cluster: a cluster under 6 bytes that
// starts with a key is replaced whole by the replacement of the shortest such key (so
// "a\u0308\u0304" becomes "ä", the macron lost); otherwise each character is looked up on
// its own. fathom does the same, clusters from utf8proc.
#include <nlohmann/json_fwd.hpp>

#include <memory>

#include "text/tokenizer/normalizers.h"

namespace fathom::tok {

std::unique_ptr<Normalizer> make_precompiled_normalizer(const nlohmann::json& j);

}  // namespace fathom::tok
