// A malformed or unsupported tokenizer.json is a clear fathom::Error that names the
// file, the construct and the offending value; never a crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "text/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace fathom {
namespace {

using nlohmann::json;

json minimal() { return testing::minimal_tokenizer_json(); }

// The message of the error from_json throws, or "" if it throws none.
std::string error_of_text(const std::string& tokenizer_json, const std::string& config_json = "") {
  try {
    Tokenizer::from_json(tokenizer_json, config_json);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const json& j) { return error_of_text(j.dump()); }

#define EXPECT_ERROR_HAS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "message: \"" << (message) << "\" lacks \"" << (part) << "\""

TEST(TokenizerErrors, MinimalIsFine) {
  EXPECT_EQ(error_of(minimal()), "");
  EXPECT_EQ(Tokenizer::from_json(minimal().dump()).encode("ab", true), (std::vector<int32_t>{2}));
}

TEST(TokenizerErrors, InvalidJson) {
  EXPECT_ERROR_HAS(error_of_text("{\"model\": "), "tokenizer.json: invalid JSON");
  EXPECT_ERROR_HAS(error_of_text("[1, 2]"), "tokenizer.json: expected a JSON object");
  EXPECT_ERROR_HAS(error_of_text(minimal().dump(), "{oops"), "tokenizer_config.json: invalid JSON");
}

TEST(TokenizerErrors, MissingOrUnsupportedModel) {
  json j = minimal();
  j.erase("model");
  EXPECT_ERROR_HAS(error_of(j), "missing field \"model\"");
  j = minimal();
  j["model"]["type"] = "Markov";
  EXPECT_ERROR_HAS(error_of(j), "unsupported model type \"Markov\"");
  j = minimal();
  j["model"] = {{"type", "Unigram"}, {"vocab", json::array({json::array({"a", -1.0}), "b"})}};
  EXPECT_ERROR_HAS(error_of(j), "Unigram model: vocab[1] must be [piece, score]");
  j["model"] = {{"type", "Unigram"}, {"vocab", json::array({json::array({"a", -1.0})})}, {"unk_id", 3}};
  EXPECT_ERROR_HAS(error_of(j), "Unigram model: unk_id 3 is beyond the 1 pieces");
  j["model"] = {{"type", "WordPiece"}, {"vocab", {{"a", -2}}}};
  EXPECT_ERROR_HAS(error_of(j), "WordPiece model: the id of vocab token \"a\" must be a token id");
  j = minimal();
  j["model"].erase("vocab");
  EXPECT_ERROR_HAS(error_of(j), "BPE model: missing field \"vocab\"");
  j = minimal();
  j["model"]["dropout"] = 1.5;
  EXPECT_ERROR_HAS(error_of(j), "dropout must be null or a probability in [0, 1], got 1.5");
}

TEST(TokenizerErrors, BadMerges) {
  json j = minimal();
  j["model"]["merges"] = json::array({"a b c"});
  EXPECT_ERROR_HAS(error_of(j), "merge 0 (\"a b c\") must be two tokens separated by one space");
  j["model"]["merges"] = json::array({"a zz"});
  EXPECT_ERROR_HAS(error_of(j), "merge 0 uses \"zz\", which is not in the vocabulary");
  j["model"]["merges"] = json::array({json::array({"b", "a"})});
  EXPECT_ERROR_HAS(error_of(j), "merge 0 makes \"ba\", which is not in the vocabulary");
  j["model"]["merges"] = json::array({42});
  EXPECT_ERROR_HAS(error_of(j), "merge 0 must be \"a b\" or [\"a\", \"b\"]");
}

TEST(TokenizerErrors, UnsupportedComponentsAreNamed) {
  json j = minimal();
  j["normalizer"] = {{"type", "X"}};
  EXPECT_ERROR_HAS(error_of(j), "unsupported normalizer type \"X\"");
  j = minimal();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "Precompiled"}}})}};
  EXPECT_ERROR_HAS(error_of(j), "normalizer Precompiled: missing field \"precompiled_charsmap\"");
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA*"}};
  EXPECT_ERROR_HAS(error_of(j), "normalizer Precompiled: precompiled_charsmap is not base64 (byte 4)");
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "QAAAAA=="}};  // a 64-byte trie in 4 bytes
  EXPECT_ERROR_HAS(error_of(j), "normalizer Precompiled: the trie of 64 bytes does not fit the 4-byte precompiled_charsmap");
  j = minimal();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "Syllables"}}})}};
  EXPECT_ERROR_HAS(error_of(j), "unsupported pre_tokenizer type \"Syllables\"");
  j = minimal();
  j["decoder"] = {{"type", "Telepathy"}};
  EXPECT_ERROR_HAS(error_of(j), "unsupported decoder type \"Telepathy\"");
  j = minimal();
  j["post_processor"] = {{"type", "Mystery"}};
  EXPECT_ERROR_HAS(error_of(j), "unsupported post_processor type \"Mystery\"");
  j = minimal();
  j["normalizer"] = {{"no_type", true}};
  EXPECT_ERROR_HAS(error_of(j), "normalizer: missing field \"type\"");
}

TEST(TokenizerErrors, BadComponentFields) {
  json j = minimal();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(\\p{L}"}}}, {"behavior", "Isolated"}, {"invert", false}};
  EXPECT_ERROR_HAS(error_of(j), "pre_tokenizer Split: cannot compile regex \"(\\p{L}\"");
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}, {"invert", false}};
  EXPECT_ERROR_HAS(error_of(j), "pre_tokenizer Split: unsupported split behavior \"Sideways\"");
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", "a"}, {"behavior", "Isolated"}};
  EXPECT_ERROR_HAS(error_of(j), "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  j = minimal();
  j["normalizer"] = {{"type", "Prepend"}, {"prepend", 3}};
  EXPECT_ERROR_HAS(error_of(j), "normalizer Prepend: field \"prepend\" must be a string");
  j = minimal();
  j["decoder"] = {{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}};
  EXPECT_ERROR_HAS(error_of(j), "decoder Strip: \"content\" must be one character");
  j = minimal();
  j["added_tokens"] = json::array({{{"id", 5}}});
  EXPECT_ERROR_HAS(error_of(j), "added_tokens[0]: missing field \"content\"");
  j = minimal();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"special_tokens", json::object()}};
  EXPECT_ERROR_HAS(error_of(j), "special token \"<s>\" is used but not defined in special_tokens");
  j = minimal();
  j["model"]["fuse_unk"] = "yes";
  EXPECT_ERROR_HAS(error_of(j), "BPE model: field \"fuse_unk\" must be a boolean, got string");
  j = minimal();
  j["normalizer"] = "NFC";
  EXPECT_ERROR_HAS(error_of(j), "normalizer: expected a JSON object, got string");
  j = minimal();
  j["added_tokens"] = json::array({{{"content", "<x>"}, {"id", "7"}}});
  EXPECT_ERROR_HAS(error_of(j), "added_tokens[0]: \"id\" must be a token id, an integer in [0, 16777215], got \"7\"");
}

TEST(TokenizerErrors, LoadNamesTheFolder) {
  const auto dir = std::filesystem::temp_directory_path() / "fathom_tokenizer_errors_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  try {
    Tokenizer::load(dir.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_ERROR_HAS(std::string(e.what()), "tokenizer.json not found");
  }
  json j = minimal();
  j["decoder"] = {{"type", "Nope"}};
  std::ofstream(dir / "tokenizer.json") << j.dump();
  try {
    Tokenizer::load(dir.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_ERROR_HAS(std::string(e.what()), dir.string() + ": unsupported decoder type \"Nope\"");
  }
  std::filesystem::remove_all(dir);
}

TEST(TokenizerErrors, EncodeRejectsInvalidUtf8) {
  const Tokenizer tok = Tokenizer::from_json(minimal().dump());
  try {
    tok.encode("ab\xC3", false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_ERROR_HAS(std::string(e.what()), "Tokenizer::encode: the text is not valid UTF-8 (byte 2 of 3)");
  }
  EXPECT_THROW(tok.id_to_token(77), Error);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{-1, 77, 2}), "ab");  // no decoder: tokens joined by spaces; unknown ids skipped
}

}  // namespace
}  // namespace fathom
