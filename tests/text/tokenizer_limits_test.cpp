// Hostile tokenizer.json files and hostile inputs: every token id is range-checked
// (no int32 overflow, no huge tables), encode refuses texts above kMaxEncodeBytes, and
// pathological texts (one character repeated, random bytes, one CJK character
// repeated) encode in time linear-ish in their size.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "sanitized_build.h"
#include "tokenizer_test_util.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom {
namespace {

using nlohmann::json;

json minimal() { return testing::minimal_tokenizer_json(); }

std::string error_of(const json& j) {
  try {
    Tokenizer::from_json(j.dump());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "message: \"" << (message) << "\" lacks \"" << (part) << "\""

json added(json id) { return json::array({{{"content", "<x>"}, {"id", std::move(id)}, {"special", true}}}); }

TEST(TokenizerLimits, AddedTokenIdsAreRangeChecked) {
  for (const json& bad : {json(2147483647), json(int64_t(1) << 40), json(-1), json(uint64_t(18446744073709551615ull)),
                          json(16777216), json(1.5), json(1e20), json("3"), json(nullptr)}) {
    json j = minimal();
    j["added_tokens"] = added(bad);
    const std::string e = error_of(j);
    EXPECT_ERROR_HAS(e, "added_tokens[0]: \"id\" must be a token id, an integer in [0, 16777215], got " + bad.dump());
  }
}

TEST(TokenizerLimits, TwoAddedTokensCannotShareAnId) {
  // Found by fuzz_tokenizer: "XY" kept encoding to 5 after "QQ" took id 5 and then moved to 8,
  // so encode produced an id that names no token.
  json j = minimal();
  j["added_tokens"] = json::array({{{"content", "XY"}, {"id", 5}}, {{"content", "QQ"}, {"id", 5}}, {{"content", "QQ"}, {"id", 8}}});
  EXPECT_ERROR_HAS(error_of(j), "added tokens \"XY\" and \"QQ\" both have id 5");
  // The same token listed twice under its id is fine.
  j["added_tokens"] = json::array({{{"content", "XY"}, {"id", 3}}, {{"content", "XY"}, {"id", 3}}});
  EXPECT_EQ(error_of(j), "");
}

TEST(TokenizerLimits, VocabIdsAreRangeChecked) {
  for (const json& bad : {json(2147483647), json(-5), json(int64_t(1) << 33), json(2.0), json("0")}) {
    json j = minimal();
    j["model"]["vocab"]["ab"] = bad;
    EXPECT_ERROR_HAS(error_of(j), "BPE model: the id of vocab token \"ab\" must be a token id, an integer in [0, "
                                  "16777215], got " + bad.dump());
  }
}

TEST(TokenizerLimits, SparseIdSpacesAreRefused) {
  // A few tokens with ids near the cap would make every id-indexed table 16M entries long.
  json j = minimal();
  j["model"]["vocab"]["ab"] = 16777215;
  EXPECT_ERROR_HAS(error_of(j), "BPE model vocab: the largest token id 16777215 is far beyond the 3 tokens defined");
  j = minimal();
  j["added_tokens"] = added(16000000);
  EXPECT_ERROR_HAS(error_of(j), "tokenizer.json added_tokens: the largest token id 16000000 is far beyond the 4 tokens");
  // Gaps within bounds are fine (real vocabularies pad their id space).
  j = minimal();
  j["added_tokens"] = added(100000);
  EXPECT_EQ(error_of(j), "");
  const Tokenizer tok = Tokenizer::from_json(j.dump());
  EXPECT_EQ(tok.encode("ab<x>", false), (std::vector<int32_t>{2, 100000}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 100000, 99999, -7, 2147483647}), "ab <x>");
  EXPECT_FALSE(tok.is_special(2147483647));
  EXPECT_FALSE(tok.is_special(-1));
}

TEST(TokenizerLimits, PostProcessorIdsAreChecked) {
  json j = minimal();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", json::array({4294967296})}}}}}};
  EXPECT_ERROR_HAS(error_of(j), "an id of special token \"<s>\" must be a token id, an integer in [0, 16777215], got "
                                "4294967296");
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = json::array({77});
  EXPECT_ERROR_HAS(error_of(j), "post_processor adds id 77, which names no token (largest id 2)");
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = json::array({1});
  EXPECT_EQ(Tokenizer::from_json(j.dump()).encode("ab", true), (std::vector<int32_t>{1, 2}));

  j = minimal();
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", json::array({"<s>", -1})}, {"sep", json::array({"</s>", 1})}};
  EXPECT_ERROR_HAS(error_of(j), "post_processor RobertaProcessing: the id of \"cls\" must be a token id");
  j["post_processor"]["cls"] = json::array({"<s>", 0});
  j["post_processor"]["sep"] = json::array({"</s>", 2147483647});
  EXPECT_ERROR_HAS(error_of(j), "the id of \"sep\" must be a token id");
}

TEST(TokenizerLimits, WrongJsonTypesAreCleanErrors) {
  // Whatever the shape, loading fails with fathom::Error, never another exception type.
  const json bad_values[] = {nullptr, 1, "x", json::array({1}), json::object({{"k", 1}}), true};
  const char* const fields[] = {"normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens", "model"};
  for (const char* field : fields) {
    for (const json& v : bad_values) {
      json j = minimal();
      j[field] = v;
      try {
        Tokenizer::from_json(j.dump());
      } catch (const Error&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << field << " = " << v.dump() << " threw a non-fathom error: " << e.what();
      }
    }
  }
  for (const char* field : {"vocab", "merges", "unk_token", "byte_fallback", "continuing_subword_prefix"}) {
    for (const json& v : bad_values) {
      json j = minimal();
      j["model"][field] = v;
      try {
        Tokenizer::from_json(j.dump());
      } catch (const Error&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << "model." << field << " = " << v.dump() << " threw a non-fathom error: " << e.what();
      }
    }
  }
}

TEST(TokenizerLimits, EncodeRefusesHugeTexts) {
  const Tokenizer tok = Tokenizer::from_json(minimal().dump());
  const std::string huge(Tokenizer::kMaxEncodeBytes + 1, 'a');
  try {
    tok.encode(huge, false);
    ADD_FAILURE() << "a text above kMaxEncodeBytes was encoded";
  } catch (const Error& e) {
    EXPECT_ERROR_HAS(std::string(e.what()), "Tokenizer::encode: the text is 67108865 bytes, more than the 67108864");
  }
}

double encode_seconds(const Tokenizer& tok, const std::string& text, size_t* n_ids) {
  const auto t0 = std::chrono::steady_clock::now();
  *n_ids = tok.encode(text, false).size();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A megabyte of one character, of random bytes (made valid UTF-8) and of one CJK
// character: one long pre-tokenized word each, which BPE must merge in ~n log n.
TEST(TokenizerLimits, PathologicalTextsEncodeInLinearishTime) {
  std::mt19937 rng(1234);
  std::string random_bytes;  // random bytes read as Latin-1 (encode takes valid UTF-8 only)
  while (random_bytes.size() < (1 << 20)) {
    const unsigned b = rng() & 0xFF;
    if (b < 0x80) {
      random_bytes.push_back(char(b));
    } else {
      random_bytes.push_back(char(0xC0 | (b >> 6)));
      random_bytes.push_back(char(0x80 | (b & 0x3F)));
    }
  }
  std::string cjk;
  while (cjk.size() < (1 << 20)) cjk += "\xE4\xB8\xAD";  // 中
  std::string prose;
  while (prose.size() < (1 << 20)) prose += "The tokenizer must be fast on ordinary prose, too; 1234 numbers. ";
  const std::pair<const char*, std::string> texts[] = {
      {"1 MiB of 'a'", std::string(1 << 20, 'a')}, {"1 MiB of random bytes", random_bytes}, {"1 MiB of 中", cjk},
      {"1 MiB of prose", prose}};
  for (const char* name : testing::kRealTokenizers) {
    const Tokenizer* tok = testing::real_tokenizer(name);
    if (!tok) continue;
    for (const auto& [what, text] : texts) {
      size_t n = 0;
      const double s = encode_seconds(*tok, text, &n);
      std::printf("[ timing   ] %s: %s -> %zu ids in %.3f s\n", name, what, n, s);
      EXPECT_GT(n, 0u);
      EXPECT_LT(s, 10.0) << name << ": " << what;
    }
    // Doubling the size must not quadruple the time. Each size's best of three,
    // so a busy moment on a shared machine does not land on one side only.
    // (A sanitizer's timings say nothing of a release build's.)
    if (testing::kSanitizedBuild) continue;
    const std::string a1(1 << 19, 'a'), a2(1 << 20, 'a');
    size_t n = 0;
    double t1 = 1e9, t2 = 1e9;
    for (int i = 0; i < 3; ++i) {
      t1 = std::min(t1, encode_seconds(*tok, a1, &n));
      t2 = std::min(t2, encode_seconds(*tok, a2, &n));
    }
    EXPECT_LT(t2, 3.0 * t1 + 0.05) << name << ": 512 KiB of 'a' in " << t1 << " s, 1 MiB in " << t2 << " s";
  }
}

}  // namespace
}  // namespace fathom
