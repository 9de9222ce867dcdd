#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <random>

#include "grammar/grammar_constraint.h"
#include "grammar/json_schema_grammar.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::grammar {
namespace {

using ojson = nlohmann::ordered_json;

const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, Tokenizer::load(std::string(FATHOM_TOKENIZERS_DIR) + "/" + name)).first;
  return it->second;
}

TEST(TokenBytes, MatchDecodeForCompleteTokens) {
  for (const char* name : {"qwen3", "llama3_1", "gemma3"}) {
    const Tokenizer& t = tokenizer(name);
    const auto bytes = t.token_bytes();
    std::mt19937 rng(1);
    int checked = 0;
    for (int i = 0; i < 5000; ++i) {
      const int32_t id = std::uniform_int_distribution<int32_t>(0, int32_t(bytes.size()) - 1)(rng);
      if (bytes[size_t(id)].empty() || t.is_special(id)) continue;
      const std::string text = t.decode(std::vector<int32_t>{id});
      if (text.find("\xEF\xBF\xBD") != std::string::npos) continue;  // part of a character
      // A leading-space piece may lose its space at the start of a decode; compare in the middle.
      const std::string mid = t.decode(std::vector<int32_t>{t.encode("a", false).at(0), id});
      ASSERT_GE(mid.size(), bytes[size_t(id)].size()) << name << " id " << id << " " << t.id_to_token(id) << " -> " << mid;
      EXPECT_EQ(mid.substr(mid.size() - bytes[size_t(id)].size()), bytes[size_t(id)]) << name << " id " << id;
      ++checked;
    }
    EXPECT_GT(checked, 2000) << name;
  }
  // SentencePiece byte fallback: <0x41> is the byte 'A'.
  const Tokenizer& gemma = tokenizer("gemma3");
  EXPECT_EQ(gemma.token_bytes()[size_t(*gemma.token_to_id("<0x41>"))], "A");
}

// The mask from the trie walk against each token walked on its own: never a
// token the grammar rejects, and every token it accepts wherever no long
// repetition count was cut (inside maxLength the mask may keep a subset).
TEST(GrammarConstraint, MaskEqualsTokenByTokenCheck) {
  const ojson schema = ojson::parse(R"({"type": "object", "properties": {
      "id": {"type": "integer", "minimum": 1, "maximum": 999},
      "title": {"type": "string", "maxLength": 40},
      "note": {"type": "string"},
      "done": {"type": "boolean"}}, "required": ["id", "title", "note", "done"]})");
  for (const char* name : {"qwen3", "gemma3"}) {
    const Tokenizer& t = tokenizer(name);
    auto vocab = TokenVocabulary::from_tokenizer(t, t.vocab_size() + 3);
    auto compiled = std::make_shared<CompiledGrammar>(json_schema_grammar(schema), vocab);
    const std::string text = R"({"id": 42, "title": "Buy milk ünd bread", "note": "a ☃ \"quoted\" note", "done": false})";
    const int32_t end = *t.eos_token_id();
    GrammarConstraint constraint(compiled, {end});
    std::vector<float> logits(size_t(vocab->size()));
    int exact = 0, cut = 0;
    for (size_t pos = 0; pos <= text.size(); pos += 3) {
      const auto lock = compiled->lock();
      GrammarAutomaton& a = compiled->automaton();
      const int32_t state = a.walk(a.initial(), text.substr(0, pos));
      ASSERT_NE(state, GrammarAutomaton::kDead) << pos;
      const bool complete = a.mask_state(state, CompiledGrammar::kCountHorizon) == state;
      (complete ? exact : cut) += 1;
      const std::vector<uint64_t> bits = compiled->allowed(state);
      size_t allowed = 0, alive_count = 0;
      for (int32_t id = 0; id < int32_t(vocab->size()); ++id) {
        const std::string& b = vocab->bytes(id);
        const bool alive = !b.empty() && a.walk(state, b) != GrammarAutomaton::kDead;
        const bool bit = (bits[size_t(id) >> 6] >> (id & 63)) & 1;
        if (bit) ASSERT_TRUE(alive) << name << " at " << pos << ": id " << id << " is allowed but breaks the grammar";
        if (complete) ASSERT_EQ(bit, alive) << name << " at " << pos << " id " << id;
        allowed += bit;
        alive_count += alive;
      }
      EXPECT_TRUE(allowed > 0 || a.accepting(state)) << pos;
      if (!complete) EXPECT_GT(double(allowed), 0.5 * double(alive_count)) << pos;
    }
    EXPECT_GT(exact, 10);
    EXPECT_GT(cut, 2);
    // The end id comes only when the text is complete.
    std::fill(logits.begin(), logits.end(), 0.5f);
    constraint.mask(logits, 1 << 20);
    EXPECT_TRUE(std::isinf(logits[size_t(end)]));
    EXPECT_TRUE(std::isinf(logits[size_t(vocab->size() - 1)]));  // ids past the tokenizer
    for (const int32_t id : t.encode(text, false)) ASSERT_TRUE(constraint.accept(id)) << id;
    std::fill(logits.begin(), logits.end(), 0.5f);
    constraint.mask(logits, 1 << 20);
    EXPECT_EQ(logits[size_t(end)], 0.5f);
    EXPECT_FALSE(constraint.accept(t.encode("a", false).at(0)));
    EXPECT_TRUE(constraint.accept(end));
    EXPECT_TRUE(constraint.finished());
    constraint.rollback(1);
    EXPECT_FALSE(constraint.finished());
  }
}

// Sampling from random logits under the mask always gives a valid document.
TEST(GrammarConstraint, RandomLogitsUnderTheMaskGiveValidJson) {
  const ojson schema = ojson::parse(R"({"type": "object", "properties": {
      "n": {"type": "integer", "minimum": -5, "maximum": 5},
      "s": {"type": "string", "maxLength": 12},
      "list": {"type": "array", "items": {"type": "number"}, "maxItems": 4}}, "required": ["n", "s", "list"],
      "additionalProperties": false})");
  const Tokenizer& t = tokenizer("qwen3");
  auto vocab = TokenVocabulary::from_tokenizer(t, t.vocab_size());
  auto compiled = std::make_shared<CompiledGrammar>(json_schema_grammar(schema), vocab);
  const int32_t end = *t.eos_token_id();
  std::mt19937_64 rng(21);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<float> logits(size_t(vocab->size()));
  for (int sample = 0; sample < 20; ++sample) {
    GrammarConstraint c(compiled, {end});
    std::vector<int32_t> ids;
    for (int step = 0; step < 400; ++step) {
      for (float& x : logits) x = noise(rng);
      c.mask(logits, 1 << 20);
      const int32_t id = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ASSERT_FALSE(std::isinf(logits[size_t(id)]));
      ASSERT_TRUE(c.accept(id));
      if (id == end) break;
      ids.push_back(id);
    }
    ASSERT_TRUE(c.finished()) << t.decode(ids);
    const ojson v = ojson::parse(t.decode(ids));
    EXPECT_GE(v["n"].get<int>(), -5);
    EXPECT_LE(v["n"].get<int>(), 5);
    EXPECT_LE(v["list"].size(), 4u);
  }
  EXPECT_LT(compiled->cached_masks(), CompiledGrammar::kMaxCachedMasks);
}

// With a token budget, the answer ends inside it: near the end only tokens
// after which the text can still be completed (and the end token emitted) in
// time are allowed.
TEST(GrammarConstraint, AnswersFinishWithinTheTokenBudget) {
  const ojson schema = ojson::parse(R"({"type": "object", "properties": {
      "items": {"type": "array", "items": {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}},
      "done": {"type": "boolean"}}, "required": ["items", "done"]})");
  const Tokenizer& t = tokenizer("qwen3");
  auto vocab = TokenVocabulary::from_tokenizer(t, t.vocab_size());
  auto compiled = std::make_shared<CompiledGrammar>(json_schema_grammar(schema), vocab);
  const int32_t end = *t.eos_token_id();
  std::mt19937_64 rng(5);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<float> logits(size_t(vocab->size()));
  for (const int budget : {24, 40, 64}) {
    for (int sample = 0; sample < 4; ++sample) {
      GrammarConstraint c(compiled, {end});
      std::vector<int32_t> ids;
      bool ended = false;
      for (int step = 0; step < budget && !ended; ++step) {
        for (float& x : logits) x = noise(rng);
        c.mask(logits, budget - step);
        const int32_t id = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        ASSERT_TRUE(c.accept(id));
        ended = id == end;
        if (!ended) ids.push_back(id);
      }
      ASSERT_TRUE(ended) << "budget " << budget << ": " << t.decode(ids);
      const ojson v = ojson::parse(t.decode(ids));
      EXPECT_TRUE(v["done"].is_boolean());
    }
  }
}

TEST(GrammarConstraint, StartsAfterTheReasoningBlock) {
  const Tokenizer& t = tokenizer("qwen3");
  auto vocab = TokenVocabulary::from_tokenizer(t, t.vocab_size());
  auto compiled = std::make_shared<CompiledGrammar>(json_schema_grammar(ojson{{"type", "boolean"}}), vocab);
  const int32_t think_end = *t.token_to_id("</think>");
  GrammarConstraint c(compiled, {*t.eos_token_id()}, ReasoningTokens{*t.token_to_id("<think>"), think_end, true, false});
  std::vector<float> logits(size_t(vocab->size()), 1.0f);
  c.mask(logits, 1 << 20);
  EXPECT_EQ(std::count(logits.begin(), logits.end(), 1.0f), int64_t(logits.size()));  // free while reasoning
  for (const int32_t id : t.encode("Let me think.", false)) EXPECT_TRUE(c.accept(id));
  EXPECT_TRUE(c.accept(think_end));
  EXPECT_TRUE(c.active());
  c.mask(logits, 1 << 20);
  EXPECT_TRUE(std::isinf(logits[size_t(t.encode("Let", false)[0])]));
  EXPECT_FALSE(std::isinf(logits[size_t(t.encode("true", false)[0])]));
  c.rollback(1);
  EXPECT_FALSE(c.active());

  // A model that may open the block itself: its first token may be <think>, and only its first.
  const int32_t think_open = *t.token_to_id("<think>");
  GrammarConstraint may(compiled, {*t.eos_token_id()}, ReasoningTokens{think_open, think_end, false, true});
  std::fill(logits.begin(), logits.end(), 1.0f);
  may.mask(logits, 1 << 20);
  EXPECT_EQ(logits[size_t(think_open)], 1.0f);
  EXPECT_TRUE(std::isinf(logits[size_t(t.encode("Let", false)[0])]));
  ASSERT_TRUE(may.accept(t.encode("true", false)[0]));
  std::fill(logits.begin(), logits.end(), 1.0f);
  may.mask(logits, 1 << 20);
  EXPECT_TRUE(std::isinf(logits[size_t(think_open)]));
  may.rollback(1);
  ASSERT_TRUE(may.accept(think_open));
  EXPECT_FALSE(may.active());
  EXPECT_TRUE(may.accept(t.encode("Let", false)[0]));
  EXPECT_TRUE(may.accept(think_end));
  EXPECT_TRUE(may.active());
}

}  // namespace
}  // namespace fathom::grammar
