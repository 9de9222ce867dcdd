#pragma once
// A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) that gives the
// same ids and the same decoded text as transformers: normalizer, added tokens,
// pre-tokenizer, BPE model, post-processor and decoder, read from the files.
//
// A Tokenizer is immutable after loading, cheap to copy (copies share one model) and
// safe to use from many threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

class Tokenizer {
 public:
  // Reads <model_dir>/tokenizer.json (required) and <model_dir>/tokenizer_config.json
  // (optional). Throws fathom::Error naming the file and the construct on anything
  // malformed or unsupported.
  static Tokenizer load(const std::string& model_dir);
  // The same from the files' contents; an empty config_json means no tokenizer_config.json.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {});

  // The largest text encode accepts (a bound against hostile input; far above any context).
  static constexpr size_t kMaxEncodeBytes = size_t(64) << 20;

  // `text` must be valid UTF-8 and at most kMaxEncodeBytes (else fathom::Error). Special
  // tokens written in the text are recognised as such; add_special_tokens adds the
  // post-processor's BOS/EOS.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Ids that name no token are skipped, as Hugging Face does. Always valid UTF-8: bytes
  // that do not form characters become U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's string as stored (byte-level tokens in GPT-2's alphabet); throws for an
  // id that names no token.
  std::string id_to_token(int32_t id) const;
  // Distinct ids of the model vocabulary and the added tokens (transformers' len()).
  int64_t vocab_size() const;
  bool is_special(int32_t id) const;
  // The bytes each id adds to the text in the middle of a sequence (byte-level
  // and byte-fallback pieces as raw bytes, SentencePiece's ▁ as a space), indexed
  // by id; empty for special tokens and for ids that name no token. What a
  // grammar constraint matches tokens against.
  std::vector<std::string> token_bytes() const;
  std::vector<int32_t> special_ids() const;  // ascending

  // From tokenizer_config.json; empty (and nullopt) when the config names none.
  const std::string& bos_token() const;
  const std::string& eos_token() const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  // The ids that end generation as far as the tokenizer knows: the eos token's id
  // (generation_config.json may add more).
  std::vector<int32_t> eos_ids() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  static Tokenizer build(std::string_view tokenizer_json, std::string_view config_json);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace fathom
