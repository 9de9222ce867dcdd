#pragma once
// What fathom reads from tokenizer_config.json: the named special tokens and the
// BOS/EOS switches, as transformers (v5) applies them on top of tokenizer.json.
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace fathom::tok {

struct TokenizerConfig {
  std::string tokenizer_class;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // Every token the config names as special (bos, eos, unk, pad, sep, cls, mask,
  // additional_special_tokens, extra_special_tokens), plus the class's defaults.
  std::vector<std::string> named_special_tokens;
  // Set only when the config says so explicitly; then transformers rebuilds the
  // post-processor as "[bos] $A [eos]" from these switches.
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  bool clean_up_tokenization_spaces = false;  // read, but transformers ignores it for BPE
};

// A null JSON value (no file) gives an empty config.
TokenizerConfig parse_tokenizer_config(const nlohmann::json& j);

}  // namespace fathom::tok
