#pragma once
// Pre-tokenizers: cut normalized text into the words the model tokenizes one by one
// (Hugging Face's ByteLevel, Split, Digits, Metaspace, Whitespace, WhitespaceSplit,
// Punctuation, CharDelimiterSplit, BertPreTokenizer, FixedLength, UnicodeScripts, Sequence).
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace fathom::tok {

struct PreToken {
  std::string text;
  bool at_input_start = false;  // begins at byte 0 of the encoded text (Metaspace "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces every piece by its sub-pieces; empty pieces are dropped.
  virtual void pre_tokenize(std::vector<PreToken>& pieces) const = 0;
};

// A null JSON value means no pre-tokenizer (nullptr). Unknown types are an error.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j);

}  // namespace fathom::tok
