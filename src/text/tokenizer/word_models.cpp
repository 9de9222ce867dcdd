#include "text/tokenizer/word_models.h"

#include "text/tokenizer/json_util.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {

namespace {

// The vocabulary side both models share.
class VocabModel : public Model {
 public:
  explicit VocabModel(VocabTable vocab) : vocab_(std::move(vocab)) {}
  std::optional<int32_t> token_to_id(std::string_view token) const override { return vocab_.find(token); }
  const std::string* id_to_token(int32_t id) const override { return vocab_.token(id); }
  int64_t vocab_size() const override { return vocab_.size(); }
  int32_t max_id() const override { return vocab_.max_id(); }

 protected:
  // Hugging Face fails the encoding when it needs unk_token and the vocabulary lacks it.
  int32_t unk_id(const std::string& unk, std::string_view model, std::string_view word) const {
    const auto id = vocab_.find(unk);
    check(id.has_value(), model, ": \"", word, "\" is not in the vocabulary and unk_token \"", unk,
          "\" is not either");
    return *id;
  }
  VocabTable vocab_;
};

class WordLevelModel final : public VocabModel {
 public:
  WordLevelModel(VocabTable vocab, std::string unk) : VocabModel(std::move(vocab)), unk_(std::move(unk)) {}
  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    if (auto id = vocab_.find(word)) out.push_back(*id);
    else out.push_back(unk_id(unk_, "WordLevel model", word));
  }

 private:
  std::string unk_;
};

class WordPieceModel final : public VocabModel {
 public:
  WordPieceModel(VocabTable vocab, std::string unk, std::string prefix, size_t max_chars)
      : VocabModel(std::move(vocab)), unk_(std::move(unk)), prefix_(std::move(prefix)), max_chars_(max_chars) {}
  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    if (code_point_count(word) > max_chars_) {
      out.push_back(unk_id(unk_, "WordPiece model", word));
      return;
    }
    const size_t first = out.size();
    std::string candidate;
    for (size_t start = 0; start < word.size();) {
      // The longest piece from `start`, shrinking one character at a time.
      std::optional<int32_t> id;
      size_t end = word.size();
      while (end > start) {
        candidate.assign(start > 0 ? prefix_ : std::string());
        candidate.append(word.substr(start, end - start));
        if ((id = vocab_.find(candidate))) break;
        do --end;
        while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
      }
      if (!id) {  // an uncovered part makes the whole word unknown
        out.resize(first);
        out.push_back(unk_id(unk_, "WordPiece model", word));
        return;
      }
      out.push_back(*id);
      start = end;
    }
  }

 private:
  std::string unk_, prefix_;
  size_t max_chars_;
};

}  // namespace

std::unique_ptr<Model> make_wordlevel_model(const json& j) {
  constexpr std::string_view what = "WordLevel model";
  return std::make_unique<WordLevelModel>(VocabTable::from_json(require_field(j, "vocab", what), what),
                                          optional_string(j, "unk_token", what).value_or("<unk>"));
}

std::unique_ptr<Model> make_wordpiece_model(const json& j) {
  constexpr std::string_view what = "WordPiece model";
  const int64_t max_chars = int_or(j, "max_input_chars_per_word", 100, what);
  check(max_chars >= 0, what, ": max_input_chars_per_word must not be negative, got ", max_chars);
  return std::make_unique<WordPieceModel>(VocabTable::from_json(require_field(j, "vocab", what), what),
                                          optional_string(j, "unk_token", what).value_or("[UNK]"),
                                          optional_string(j, "continuing_subword_prefix", what).value_or("##"),
                                          size_t(max_chars));
}

}  // namespace fathom::tok
