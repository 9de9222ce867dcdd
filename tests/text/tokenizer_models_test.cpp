// Unit tests of the WordPiece, WordLevel and Unigram models, BPE's dropout, the
// post-processor rule and the Oniguruma meaning of \w, on hand-made cases whose expected
// results follow Hugging Face tokenizers' source (the trained tokenizers of
// components.json cover the common paths; these cover unknowns, limits and errors).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer/model.h"
#include "text/tokenizer/regex.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer_test_util.h"

namespace fathom::tok {
namespace {

using nlohmann::json;
using I = std::vector<int32_t>;

I run(const json& model, const std::string& word) {
  I ids;
  make_model(model)->tokenize(word, ids);
  return ids;
}

TEST(WordPieceModel, LongestPiecesFromTheLeftWithPrefix) {
  const json m = {{"type", "WordPiece"},
                  {"vocab", {{"[UNK]", 0}, {"un", 1}, {"##aff", 2}, {"##able", 3}, {"una", 4}, {"##ff", 5}, {"a", 6}}},
                  {"unk_token", "[UNK]"},
                  {"continuing_subword_prefix", "##"},
                  {"max_input_chars_per_word", 8}};
  EXPECT_EQ(run(m, "unaffable"), (I{0}));  // 9 characters: over max_input_chars_per_word
  json wide = m;
  wide["max_input_chars_per_word"] = 100;
  EXPECT_EQ(run(wide, "unaffable"), (I{4, 5, 3}));  // greedy: "una" beats "un", then "##ff", "##able"
  EXPECT_EQ(run(wide, "unab"), (I{0}));             // "b" is in no piece: the whole word is unknown
  EXPECT_EQ(run(wide, "a"), (I{6}));
  EXPECT_EQ(make_model(wide)->vocab_size(), 7);
  EXPECT_EQ(*make_model(wide)->id_to_token(2), "##aff");
}

TEST(WordPieceModel, CutsOnlyBetweenCharacters) {
  const json m = {{"type", "WordPiece"}, {"vocab", {{"[UNK]", 0}, {"é", 1}, {"##é", 2}, {"##x", 3}}}};
  EXPECT_EQ(run(m, "ééx"), (I{1, 2, 3}));
  EXPECT_EQ(run(m, "xé"), (I{0}));
}

TEST(WordLevelModel, WholeWordsOrUnknown) {
  const json m = {{"type", "WordLevel"}, {"vocab", {{"<unk>", 0}, {"hello", 1}, {"world", 2}}}, {"unk_token", "<unk>"}};
  EXPECT_EQ(run(m, "hello"), (I{1}));
  EXPECT_EQ(run(m, "hell"), (I{0}));
  const json no_unk = {{"type", "WordLevel"}, {"vocab", {{"hello", 1}}}, {"unk_token", "<unk>"}};
  try {
    run(no_unk, "bye");
    FAIL() << "an unknown word without unk_token in the vocabulary must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WordLevel model: \"bye\" is not in the vocabulary and unk_token \"<unk>\""),
              std::string::npos)
        << e.what();
  }
}

json unigram(json vocab, json unk_id = 0, bool byte_fallback = false) {
  return {{"type", "Unigram"}, {"vocab", std::move(vocab)}, {"unk_id", std::move(unk_id)}, {"byte_fallback", byte_fallback}};
}

TEST(UnigramModel, ViterbiTakesTheBestTotalScore) {
  // "ab" + "c" scores -1 + -2 = -3; "a" + "bc" scores -1.5 + -1 = -2.5; "abc" alone -4.
  const json m = unigram(json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.5}), json::array({"b", -3.0}),
                                      json::array({"c", -2.0}), json::array({"ab", -1.0}), json::array({"bc", -1.0}),
                                      json::array({"abc", -4.0})}));
  EXPECT_EQ(run(m, "abc"), (I{1, 5}));
  EXPECT_EQ(run(m, "ab"), (I{4}));
  EXPECT_EQ(run(m, "cab"), (I{3, 4}));
}

TEST(UnigramModel, UnknownRunsFuseIntoOneUnk) {
  const json m = unigram(json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0}), json::array({"b", -1.0})}));
  EXPECT_EQ(run(m, "axyzb"), (I{1, 0, 2}));
  EXPECT_EQ(run(m, "xa"), (I{0, 1}));
  EXPECT_EQ(run(m, "éé"), (I{0}));
  const json no_unk = unigram(json::array({json::array({"a", -1.0})}), nullptr);
  EXPECT_THROW(run(no_unk, "ax"), Error);
}

TEST(UnigramModel, ByteFallbackForUnknownRuns) {
  json vocab = json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0})});
  for (int b : {0xC3, 0xA9, 0x78}) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab.push_back(json::array({name, -5.0}));
  }
  const json m = unigram(vocab, 0, true);
  EXPECT_EQ(run(m, "aéx"), (I{1, 2, 3, 4}));  // the fused unknown "éx" as its three bytes
  EXPECT_EQ(run(m, "aø"), (I{1, 0}));         // a byte with no <0xXX> piece: unk
}

TEST(BpeModelOptions, DropoutIsIgnoredAtInference) {
  const json base = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", json::array({"a b"})}};
  json with_dropout = base;
  with_dropout["dropout"] = 0.9;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(run(with_dropout, "abab"), run(base, "abab"));
  EXPECT_EQ(run(base, "abab"), (I{2, 2}));
}

json bpe_tokenizer(json post) {
  return {{"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", std::move(post)},
          {"decoder", nullptr},
          {"added_tokens", json::array({{{"id", 3}, {"content", "<s>"}, {"special", true}}})},
          {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"<s>", 3}}}, {"merges", json::array({"a b"})}}}};
}

TEST(PostProcessorRule, TheFilesPostProcessorWinsOverAddBosToken) {
  const std::string config = json{{"bos_token", "<s>"}, {"add_bos_token", true}}.dump();
  // DeepSeek-V3's shape: a ByteLevel post-processor and add_bos_token: nothing is added.
  const Tokenizer bytelevel =
      Tokenizer::from_json(bpe_tokenizer({{"type", "ByteLevel"}, {"trim_offsets", false}}).dump(), config);
  EXPECT_EQ(bytelevel.encode("ab", true), (I{2}));
  // No post-processor in tokenizer.json: the config's switches build the template.
  const Tokenizer none = Tokenizer::from_json(bpe_tokenizer(nullptr).dump(), config);
  EXPECT_EQ(none.encode("ab", true), (I{3, 2}));
  EXPECT_EQ(none.encode("ab", false), (I{2}));
}

TEST(TokenizerFile, TruncationAndPaddingAreIgnoredAsTransformersDoes) {
  json j = bpe_tokenizer(nullptr);
  j["truncation"] = {{"direction", "Right"}, {"max_length", 2}, {"strategy", "LongestFirst"}, {"stride", 0}};
  j["padding"] = {{"strategy", {{"Fixed", 8}}}, {"direction", "Right"}, {"pad_id", 3}, {"pad_token", "<s>"}};
  const Tokenizer tok = Tokenizer::from_json(j.dump());
  EXPECT_EQ(tok.encode("abababa", false), (I{2, 2, 2, 0}));  // neither cut to 2 nor padded to 8
}

TEST(BpeModelOptions, UnkTokenMissingFromTheVocabularyFailsOnlyWhenNeeded) {
  const json m = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", json::array({"a b"})},
                  {"unk_token", "<unk>"}};
  EXPECT_EQ(run(m, "abab"), (I{2, 2}));  // loads and encodes what the vocabulary covers, as Hugging Face
  try {
    run(m, "abc");
    FAIL() << "an unknown character with an unk_token outside the vocabulary must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BPE model: \"c\" is not in the vocabulary and unk_token \"<unk>\" is not either"),
              std::string::npos)
        << e.what();
  }
}

TEST(RegexWordClass, MeansOniguruma) {
  EXPECT_EQ(onig_compatible_pattern("\\w+"), "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]+");
  EXPECT_EQ(onig_compatible_pattern("[^\\w\\s]"), "[^\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}\\t-\\r\\x{85}\\p{Z}]");
  const Regex words = Regex::compile("\\w+|[^\\w\\s]+", "test");
  // A combining mark stays in its word; superscript two (No) is not a word character.
  const std::string text = "cafe\xCC\x81 x\xC2\xB2";
  const auto m = words.find_all(text);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(text.substr(m[0].first, m[0].second - m[0].first), "cafe\xCC\x81");
  EXPECT_EQ(text.substr(m[1].first, m[1].second - m[1].first), "x");
  EXPECT_EQ(text.substr(m[2].first, m[2].second - m[2].first), "\xC2\xB2");
}

}  // namespace
}  // namespace fathom::tok
