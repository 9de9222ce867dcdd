#pragma once
// The whole-word models of tokenizer.json. WordLevel maps a word to its id or to
// unk_token. WordPiece (BERT's) cuts a word greedily into the longest vocabulary pieces
// from the left, later pieces carrying continuing_subword_prefix ("##"); a word with an
// uncovered part, or longer than max_input_chars_per_word characters, is unk_token.
#include <nlohmann/json_fwd.hpp>

#include <memory>

#include "text/tokenizer/model.h"

namespace fathom::tok {

std::unique_ptr<Model> make_wordlevel_model(const nlohmann::json& j);
std::unique_ptr<Model> make_wordpiece_model(const nlohmann::json& j);

}  // namespace fathom::tok
