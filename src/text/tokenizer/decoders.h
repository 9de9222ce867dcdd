#pragma once
// Decoders: turn token strings back into text (Hugging Face's ByteLevel, ByteFallback,
// Fuse, Strip, Replace, Metaspace, BPEDecoder, WordPiece, CTC, Sequence). Each step maps the
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

// The cleanup of Hugging Face's WordPiece and CTC decoders: " ." -> "." and friends,
// " do not" -> " don't".
std::string clean_up_tokenization(std::string text);

}  // namespace fathom::tok
