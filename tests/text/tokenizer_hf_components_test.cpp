// Every normalizer, pre-tokenizer and decoder type of Hugging Face's tokenizers, with its
// options, against what tokenizers 0.23.2 itself gives on the same strings; and small
// tokenizers of each model type trained by tokenizers, encoded and decoded end to end.
// All from tests/fixtures/tokenizer/components.json (scripts/make_tokenizer_fixtures.py
// --components, run on the GPU machine).
#include <gtest/gtest.h>

#include "text/tokenizer/decoders.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/pre_tokenizers.h"
#include "text/tokenizer_test_util.h"

namespace fathom {
namespace {

using nlohmann::json;
using testing::fixture;
using testing::ids_of;
using testing::show;

const json& section(const char* key) {
  const json& c = fixture("components");
  EXPECT_FALSE(c.contains(std::string(key) + "_error")) << c.value(std::string(key) + "_error", "");
  return c.at(key);
}

// Each section holds every spec by name; a spec HF itself failed on is an error entry.
template <typename Check>
void for_each_spec(const char* key, size_t at_least, Check check) {
  const json& specs = section(key);
  EXPECT_GE(specs.size(), at_least) << key;
  for (const json& spec : specs) {
    const std::string name = spec.at("name");
    ASSERT_FALSE(spec.contains("error")) << key << " " << name << ": " << spec["error"];
    SCOPED_TRACE(std::string(key) + " " + name + " " + spec.at("json").dump());
    try {
      check(name, spec);
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  }
}

TEST(HfComponents, Normalizers) {
  for_each_spec("normalizers", 20, [](const std::string& name, const json& spec) {
    const auto n = tok::make_normalizer(spec["json"]);
    for (const json& c : spec["cases"]) {
      std::string text = c["text"];
      if (n) n->normalize(text);
      EXPECT_EQ(text, c["normalized"].get<std::string>()) << name << " on " << show(c["text"]);
    }
  });
}

// SentencePiece's nmt_nfkc character map (a model trained by sentencepiece on the device),
// on the corpus: compatibility forms, grapheme clusters, controls.
TEST(HfComponents, PrecompiledCharsmap) {
  for_each_spec("precompiled", 1, [](const std::string& name, const json& spec) {
    const auto n = tok::make_normalizer(spec["json"]);
    ASSERT_NE(n, nullptr);
    int failures = 0;
    for (const json& c : spec["cases"]) {
      std::string text = c["text"];
      n->normalize(text);
      if (text != c["normalized"].get<std::string>() && ++failures <= 10)
        ADD_FAILURE() << name << " on " << show(c["text"]) << ": " << show(text) << ", tokenizers "
                      << show(c["normalized"]);
    }
    EXPECT_EQ(failures, 0);
    EXPECT_GE(spec["cases"].size(), 300u);
  });
}

TEST(HfComponents, PreTokenizers) {
  for_each_spec("pre_tokenizers", 40, [](const std::string& name, const json& spec) {
    const auto p = tok::make_pre_tokenizer(spec["json"]);
    ASSERT_NE(p, nullptr);
    for (const json& c : spec["cases"]) {
      std::vector<tok::PreToken> pieces{{c["text"].get<std::string>(), true}};
      p->pre_tokenize(pieces);
      std::vector<std::string> got;
      for (const auto& piece : pieces) got.push_back(piece.text);
      // Hugging Face keeps no empty pieces either.
      std::vector<std::string> want;
      for (const auto& w : c["pieces"])
        if (!w.get<std::string>().empty()) want.push_back(w);
      EXPECT_EQ(got, want) << name << " on " << show(c["text"]);
    }
  });
}

TEST(HfComponents, Decoders) {
  for_each_spec("decoders", 15, [](const std::string& name, const json& spec) {
    const auto d = tok::make_decoder(spec["json"]);
    ASSERT_NE(d, nullptr);
    for (const json& c : spec["cases"]) {
      std::vector<std::string> tokens = c["tokens"];
      d->decode_chain(tokens);
      std::string got;
      for (const auto& t : tokens) got += t;
      EXPECT_EQ(got, c["decoded"].get<std::string>()) << name << " on " << c["tokens"].dump();
    }
  });
}

TEST(HfComponents, TrainedTokenizersOfEveryModelType) {
  const json& trained = section("trained");
  EXPECT_GE(trained.size(), 11u);
  for (const json& t : trained) {
    const std::string name = t.at("name");
    ASSERT_FALSE(t.contains("error")) << name << ": " << t["error"];
    SCOPED_TRACE(name);
    const Tokenizer tok = Tokenizer::from_json(t["tokenizer"].dump());
    int failures = 0;
    for (const json& c : t["cases"]) {
      const std::string text = c["text"];
      const auto ids = tok.encode(text, false);
      if (ids != ids_of(c["ids"]) && ++failures <= 5) ADD_FAILURE() << name << ": ids of " << show(text);
      if (tok.encode(text, true) != ids_of(c["ids_special"]) && ++failures <= 5)
        ADD_FAILURE() << name << ": ids (add_special_tokens) of " << show(text);
      // tokenizers' Python decode skips special tokens unless told otherwise.
      const std::string decoded = tok.decode(ids_of(c["ids"]), /*skip_special_tokens=*/true);
      if (decoded != c["decoded"].get<std::string>() && ++failures <= 5)
        ADD_FAILURE() << name << ": decoded " << show(decoded) << ", tokenizers " << show(c["decoded"]);
      const std::string skipped = tok.decode(ids_of(c["ids_special"]), true);
      if (skipped != c["decoded_skip"].get<std::string>() && ++failures <= 5)
        ADD_FAILURE() << name << ": decoded (skip special) " << show(skipped) << ", tokenizers "
                      << show(c["decoded_skip"]);
    }
    EXPECT_EQ(failures, 0) << name;
  }
}

}  // namespace
}  // namespace fathom
