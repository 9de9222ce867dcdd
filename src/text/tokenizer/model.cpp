#include "text/tokenizer/model.h"

#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/json_util.h"
#include "text/tokenizer/unigram_model.h"
#include "text/tokenizer/word_models.h"

namespace fathom::tok {

std::unique_ptr<Model> make_model(const json& j) {
  check(j.is_object(), "tokenizer.json: \"model\" must be an object");
  const std::string type = optional_string(j, "type", "model").value_or("BPE");
  if (type == "BPE") return BpeModel::from_json(j);
  if (type == "WordPiece") return make_wordpiece_model(j);
  if (type == "WordLevel") return make_wordlevel_model(j);
  if (type == "Unigram") return make_unigram_model(j);
  fail("unsupported model type \"", type, "\" (Hugging Face's are BPE, WordPiece, WordLevel and Unigram)");
}

VocabTable VocabTable::from_json(const json& vocab, std::string_view what) {
  check(vocab.is_object(), what, ": \"vocab\" must be an object of token -> id");
  VocabTable t;
  t.ids_.reserve(vocab.size());
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    if (!is_token_id(id)) fail_token_id(id, std::string(what) + ": the id of vocab token \"" + token + "\"");
    const auto i = int32_t(id.get<int64_t>());
    t.ids_.emplace(token, i);
    max_id = std::max(max_id, i);
  }
  check_id_space(max_id, t.ids_.size(), std::string(what) + " vocab");
  t.tokens_.resize(size_t(max_id + 1));
  t.has_.assign(size_t(max_id + 1), false);
  for (const auto& [token, id] : t.ids_) {
    t.tokens_[size_t(id)] = token;
    t.has_[size_t(id)] = true;
  }
  return t;
}

}  // namespace fathom::tok
