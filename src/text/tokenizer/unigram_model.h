#pragma once
// The Unigram model of tokenizer.json (SentencePiece's unigram language model): a word
// is cut into the vocabulary pieces whose scores (log probabilities) add up to the most,
// found by Viterbi over the word's bytes. A character no piece covers costs the lowest
// score minus 10 and becomes unk_id; runs of unknowns fuse into one. With byte_fallback an
// unknown run becomes its <0xXX> byte pieces instead, when all of them exist.
#include <nlohmann/json_fwd.hpp>

#include <memory>

#include "text/tokenizer/model.h"

namespace fathom::tok {

std::unique_ptr<Model> make_unigram_model(const nlohmann::json& j);

}  // namespace fathom::tok
