// Every fixture case, exactly: the ids transformers gives with and without special
// tokens, and its decoded text, for the real Qwen3, Llama 3.1 and Gemma 3 tokenizers.
// The fixtures come from scripts/make_tokenizer_fixtures.py (transformers 5.17).
#include <gtest/gtest.h>

#include <set>

#include "text/tokenizer_test_util.h"

namespace fathom {
namespace {

using testing::fixture;
using testing::ids_of;
using testing::real_tokenizer;
using testing::show;

class TokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixture, EncodeWithoutSpecialTokens) {
  const Tokenizer* tok = real_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  const auto& cases = fixture(GetParam())["cases"];
  ASSERT_GE(cases.size(), 200u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"];
    const auto got = tok->encode(text, false);
    if (got != ids_of(cases[i]["ids"]) && ++failures <= 20)
      ADD_FAILURE() << GetParam() << " case " << i << " " << show(text) << ": ids differ from transformers ("
                    << got.size() << " vs " << cases[i]["ids"].size() << " ids)";
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " cases differ";
}

TEST_P(TokenizerFixture, EncodeWithSpecialTokens) {
  const Tokenizer* tok = real_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  const auto& cases = fixture(GetParam())["cases"];
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"];
    const auto got = tok->encode(text, true);
    if (got != ids_of(cases[i]["ids_special"]) && ++failures <= 20)
      ADD_FAILURE() << GetParam() << " case " << i << " " << show(text) << ": ids (add_special_tokens) differ";
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " cases differ";
}

TEST_P(TokenizerFixture, DecodeMatchesTransformers) {
  const Tokenizer* tok = real_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  const auto& cases = fixture(GetParam())["cases"];
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto ids = ids_of(c["ids"]);
    const auto ids_special = ids_of(c["ids_special"]);
    const std::pair<std::string, std::string> checks[] = {
        {tok->decode(ids), c["decoded"]},
        {tok->decode(ids_special), c["decoded_special"]},
        {tok->decode(ids_special, /*skip_special_tokens=*/true), c["decoded_skip"]}};
    for (const auto& [got, want] : checks)
      if (got != want && ++failures <= 20)
        ADD_FAILURE() << GetParam() << " case " << i << ": decoded " << show(got) << ", transformers " << show(want);
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerFixture, DecodeArbitraryIds) {
  const Tokenizer* tok = real_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  const auto& cases = fixture(GetParam())["decode_cases"];
  ASSERT_GE(cases.size(), 100u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto ids = ids_of(cases[i]["ids"]);
    const std::string got = tok->decode(ids), got_skip = tok->decode(ids, true);
    if (got != cases[i]["decoded"].get<std::string>() && ++failures <= 20)
      ADD_FAILURE() << GetParam() << " decode case " << i << ": " << show(got) << " vs "
                    << show(cases[i]["decoded"].get<std::string>());
    if (got_skip != cases[i]["decoded_skip"].get<std::string>() && ++failures <= 20)
      ADD_FAILURE() << GetParam() << " decode case " << i << " (skip special): " << show(got_skip) << " vs "
                    << show(cases[i]["decoded_skip"].get<std::string>());
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerFixture, VocabularyAndSpecialTokens) {
  const Tokenizer* tok = real_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  const auto& meta = fixture(GetParam())["meta"];
  EXPECT_EQ(tok->vocab_size(), meta["len"].get<int64_t>());
  EXPECT_EQ(tok->bos_token(), meta["bos_token"].is_null() ? "" : meta["bos_token"].get<std::string>());
  EXPECT_EQ(tok->eos_token(), meta["eos_token"].is_null() ? "" : meta["eos_token"].get<std::string>());
  if (meta["bos_token_id"].is_null()) EXPECT_FALSE(tok->bos_token_id());
  else EXPECT_EQ(tok->bos_token_id(), meta["bos_token_id"].get<int32_t>());
  ASSERT_FALSE(meta["eos_token_id"].is_null());
  EXPECT_EQ(tok->eos_token_id(), meta["eos_token_id"].get<int32_t>());
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{meta["eos_token_id"].get<int32_t>()});
  // The ids transformers' backend treats as special (skipped by skip_special_tokens).
  EXPECT_EQ(tok->special_ids(), ids_of(meta["pipeline"]["special_added_ids"]));
  for (const auto& [id, token] : fixture(GetParam())["id_to_token"].items()) {
    const int32_t i = std::stoi(id);
    EXPECT_EQ(tok->id_to_token(i), token.get<std::string>()) << "id " << i;
    EXPECT_EQ(tok->token_to_id(token.get<std::string>()), i) << token;
  }
  EXPECT_THROW(tok->id_to_token(int32_t(tok->vocab_size()) + 1000), Error);
  EXPECT_FALSE(tok->token_to_id("this is surely not a token \x01"));
}

INSTANTIATE_TEST_SUITE_P(Real, TokenizerFixture, ::testing::Values("qwen3", "llama3_1", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fathom
