// Streaming detokenization on the real tokenizers: every chunk is valid UTF-8 on its
// own (never half a character), and the chunks add up to the full decode.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "text/tokenizer/incremental_detokenizer.h"
#include "text/tokenizer_test_util.h"

namespace fathom {
namespace {

using testing::fixture;
using testing::ids_of;
using testing::real_tokenizer;
using testing::show;
using testing::valid_utf8;

// Streams `ids` one at a time; returns the concatenation, checking every chunk.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special, int* bad_chunks) {
  IncrementalDetokenizer detok(tok, skip_special);
  std::string all;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    if (!valid_utf8(chunk)) ++*bad_chunks;
    all += chunk;
  }
  const std::string rest = detok.flush();
  if (!valid_utf8(rest)) ++*bad_chunks;
  return all + rest;
}

void chunks_are_whole_characters_and_add_up_to_decode(const std::string& name, const Tokenizer* tok) {
  const auto& cases = fixture(name)["cases"];
  int failures = 0, bad_chunks = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (const char* key : {"ids", "ids_special"}) {
      const auto ids = ids_of(cases[i][key]);
      for (bool skip : {false, true}) {
        const std::string want = tok->decode(ids, skip);
        const std::string got = stream(*tok, ids, skip, &bad_chunks);
        if (got != want && ++failures <= 10)
          ADD_FAILURE() << name << " case " << i << " (" << key << ", skip=" << skip << "): streamed "
                        << show(got) << ", decode " << show(want);
      }
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(bad_chunks, 0) << "chunks that were not valid UTF-8";
}

// Text is held back while a character is incomplete and released when it completes.
void holds_back_partial_characters(const Tokenizer* tok) {
  int split_chars = 0;
  for (const std::string text : {"𠀀𠀁𠀂 rare CJK", "👨‍👩‍👧‍👦 family 🏳️‍🌈", "龘靐齉齾", "\U0010fffd plane 16", "日本語のテキスト"}) {
    const auto ids = tok->encode(text, false);
    IncrementalDetokenizer detok(*tok);
    std::string all;
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::string piece = tok->decode(std::span<const int32_t>(&ids[k], 1));
      if (piece.find("\xEF\xBF\xBD") != std::string::npos) ++split_chars;  // this token is part of a character
      const std::string chunk = detok.push(ids[k]);
      EXPECT_TRUE(valid_utf8(chunk));
      EXPECT_EQ(chunk.find("\xEF\xBF\xBD"), std::string::npos) << "emitted U+FFFD for " << show(text);
      all += chunk;
    }
    all += detok.flush();
    EXPECT_EQ(all, text);
  }
  EXPECT_GT(split_chars, 0) << "no token in these strings split a character; the test proves nothing";
}

// One test per tokenizer: each ctest process loads the tokenizer and its fixture once.
class IncrementalFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(IncrementalFixture, StreamsWhatDecodeGives) {
  const Tokenizer* tok = real_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  {
    SCOPED_TRACE("every fixture case streamed");
    chunks_are_whole_characters_and_add_up_to_decode(GetParam(), tok);
  }
  {
    SCOPED_TRACE("partial characters held back");
    holds_back_partial_characters(tok);
  }
}

INSTANTIATE_TEST_SUITE_P(Real, IncrementalFixture, ::testing::Values("qwen3", "llama3_1", "gemma3"),
                         [](const auto& info) { return info.param; });
// Every other tokenizer of the sweep: ByteLevel, ByteFallback + Strip (Llama 2), NFKC
// (Claude) decoders stream the same text as decode does.
INSTANTIATE_TEST_SUITE_P(Sweep, IncrementalFixture,
                         ::testing::ValuesIn(std::vector<std::string>(std::begin(testing::kSweepTokenizers),
                                                                      std::end(testing::kSweepTokenizers))),
                         [](const auto& info) { return info.param; });

// Byte-fallback tokens: an emoji given as four <0x..> tokens appears only when whole.
TEST(IncrementalDetokenizer, ByteFallbackEmojiAppearsWhole) {
  const Tokenizer* tok = real_tokenizer("gemma3");
  ASSERT_NE(tok, nullptr);
  std::vector<int32_t> ids;
  for (const char* b : {"<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "<0xE4>", "<0xBD>", "<0xA0>"}) {
    const auto id = tok->token_to_id(b);
    ASSERT_TRUE(id) << b;
    ids.push_back(*id);
  }
  IncrementalDetokenizer detok(*tok);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(detok.push(id));
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "", "", "😀", "", "", "你"}));
  EXPECT_EQ(detok.flush(), "");
}

// Bytes that never form a character come out (as U+FFFD) at flush, not before.
TEST(IncrementalDetokenizer, DanglingBytesFlushAsReplacement) {
  const Tokenizer* tok = real_tokenizer("gemma3");
  ASSERT_NE(tok, nullptr);
  IncrementalDetokenizer detok(*tok);
  const std::string hi = detok.push(*tok->token_to_id("Hi"));
  EXPECT_EQ(hi, "Hi");
  EXPECT_EQ(detok.push(*tok->token_to_id("<0xE4>")), "");
  EXPECT_EQ(detok.push(*tok->token_to_id("<0xBD>")), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  const int32_t ids[] = {*tok->token_to_id("Hi"), *tok->token_to_id("<0xE4>"), *tok->token_to_id("<0xBD>")};
  EXPECT_EQ(tok->decode(ids), "Hi\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizer, ByteLevelSplitCharacter) {
  const Tokenizer* tok = real_tokenizer("qwen3");
  ASSERT_NE(tok, nullptr);
  // 'ä' is 0xC3 0xA4: as two single-byte tokens the first must not be emitted alone.
  const auto c3 = tok->token_to_id("Ã"), a4 = tok->token_to_id("¤");
  ASSERT_TRUE(c3 && a4);
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.push(*tok->token_to_id("a")), "a");
  EXPECT_EQ(detok.push(*c3), "");
  EXPECT_EQ(detok.push(*a4), "ä");
  EXPECT_EQ(detok.flush(), "");
}

// A SentencePiece-style decoder whose Strip removes the text's first space, and Metaspace
// rules that treat the first token differently: streaming must still match, for every
// sequence of up to four of these tokens (those that spell invalid UTF-8 excepted).
TEST(IncrementalDetokenizer, StartOfTextDecodersOnEverySequence) {
  using nlohmann::json;
  const json vocab = {{"▁", 0}, {"▁Hi", 1}, {"there", 2}, {"!", 3}, {"<0xE4>", 4}, {"<0xBD>", 5}, {"<0xA0>", 6},
                      {"<s>", 7}, {"▁▁", 8}};
  const json strip_decoder = {
      {"type", "Sequence"},
      {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                {{"type", "ByteFallback"}},
                                {{"type", "Fuse"}},
                                {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  const json metaspace_decoder = {
      {"type", "Sequence"},
      {"decoders", json::array({{{"type", "ByteFallback"}},
                                {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}}})}};
  for (const json& decoder : {strip_decoder, metaspace_decoder}) {
    const json tj = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"byte_fallback", true}}},
                     {"added_tokens", json::array({{{"id", 7}, {"content", "<s>"}, {"special", true}}})},
                     {"decoder", decoder}};
    const Tokenizer tok = Tokenizer::from_json(tj.dump());
    int compared = 0;
    for (int len = 1; len <= 4; ++len) {
      int combos = 1;
      for (int k = 0; k < len; ++k) combos *= 9;
      for (int c = 0; c < combos; ++c) {
        std::vector<int32_t> ids;
        for (int k = 0, x = c; k < len; ++k, x /= 9) ids.push_back(x % 9);
        for (bool skip : {false, true}) {
          int bad = 0;
          const std::string got = stream(tok, ids, skip, &bad);
          EXPECT_EQ(bad, 0);
          const std::string want = tok.decode(ids, skip);
          if (want.find("\xEF\xBF\xBD") != std::string::npos) continue;
          ++compared;
          EXPECT_EQ(got, want) << "ids " << ::testing::PrintToString(ids) << " skip " << skip << " decoder "
                               << decoder.dump();
        }
      }
    }
    EXPECT_GT(compared, 3000);
  }
}

}  // namespace
}  // namespace fathom
