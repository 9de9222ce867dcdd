#pragma once
// Decoders: turn token strings back into text (Hugging Face's ByteLevel, ByteFallback,
// Fuse, Strip, Replace, Metaspace, BPEDecoder, WordPiece, Sequence). Each step maps the
// list of token strings to a new list; the text is their concatenation.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace fathom::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// A null JSON value means no decoder (nullptr: tokens are joined with spaces).
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j);

// transformers' clean_up_tokenization: " ." -> "." and friends.
std::string clean_up_tokenization(std::string text);

}  // namespace fathom::tok
