#pragma once
// Normalizers: rewrite text before pre-tokenization (Hugging Face's NFC, NFD, NFKC,
// NFKD, Lowercase, Replace, Prepend, Strip, StripAccents, ByteLevel, BertNormalizer,
// Nmt, Precompiled (precompiled.h), Sequence).
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>

namespace fathom::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// A null JSON value means no normalizer (nullptr). Unknown types are an error.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);

}  // namespace fathom::tok
