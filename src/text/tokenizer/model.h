#pragma once
// The model of tokenizer.json: what turns one pre-tokenized word into ids. Hugging Face
// defines four: BPE (bpe_model.h), WordPiece and WordLevel (word_models.h) and Unigram
// (unigram_model.h); make_model reads the "model" object and builds the one it names.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fathom::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized word (never empty).
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual const std::string* id_to_token(int32_t id) const = 0;  // nullptr when the id has no token
  virtual int64_t vocab_size() const = 0;
  virtual int32_t max_id() const = 0;  // -1 for an empty vocabulary
};

// `j` is tokenizer.json's "model" object. A missing "type" means BPE (older files).
std::unique_ptr<Model> make_model(const nlohmann::json& j);

// A token -> id map and its inverse, read from a {"token": id, ...} object.
class VocabTable {
 public:
  static VocabTable from_json(const nlohmann::json& vocab, std::string_view what);
  std::optional<int32_t> find(std::string_view token) const {
    const auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* token(int32_t id) const {
    return id >= 0 && size_t(id) < tokens_.size() && has_[size_t(id)] ? &tokens_[size_t(id)] : nullptr;
  }
  int64_t size() const { return int64_t(ids_.size()); }
  int32_t max_id() const { return int32_t(tokens_.size()) - 1; }

 private:
  Vocab ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> has_;
};

}  // namespace fathom::tok
