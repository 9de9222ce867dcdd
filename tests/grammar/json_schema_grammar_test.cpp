#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <regex>

#include "grammar/json_schema_grammar.h"
#include "grammar_test_util.h"

namespace fathom::grammar {
namespace {

using ojson = nlohmann::ordered_json;
using testing::accepts;
using testing::random_sentence;

// Random sentences of the schema's grammar, parsed.
std::vector<ojson> samples(const ojson& schema, int n, uint64_t seed) {
  Grammar g = json_schema_grammar(schema);
  GrammarAutomaton a(g);
  std::mt19937_64 rng(seed);
  std::vector<ojson> out;
  for (int i = 0; i < n; ++i) {
    const std::string text = random_sentence(a, rng);
    EXPECT_FALSE(text.empty()) << "a random walk did not end";
    if (text.empty()) continue;
    try {
      out.push_back(ojson::parse(text));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not JSON: " << text << " (" << e.what() << ")";
    }
  }
  return out;
}

TEST(JsonSchemaGrammar, ObjectsKeepTheirRequiredPropertiesAndTypes) {
  const ojson schema = ojson::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 8},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "email": {"type": "string", "format": "email"},
      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
      "nickname": {"type": ["string", "null"]},
      "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^\\d{5}$"}},
                  "required": ["city", "zip"], "additionalProperties": false}
    },
    "required": ["name", "age", "tags", "address"],
    "additionalProperties": false
  })");
  const std::regex email(R"([a-zA-Z0-9_%+.-]+@[a-z0-9.-]+\.[a-z]{2,10})");
  int with_nickname = 0, with_email = 0;
  for (const ojson& v : samples(schema, 300, 1)) {
    ASSERT_TRUE(v.is_object());
    for (const auto& [k, x] : v.items())
      EXPECT_TRUE(schema["properties"].contains(k)) << "an extra property " << k;
    ASSERT_TRUE(v.contains("name") && v.contains("age") && v.contains("tags") && v.contains("address")) << v.dump();
    const std::string name = v["name"].get<std::string>();
    // Length counts characters; every generated one here is one code point.
    EXPECT_GE(nlohmann::json(name).dump().size(), 3u);
    ASSERT_TRUE(v["age"].is_number_integer());
    EXPECT_GE(v["age"].get<int64_t>(), 0);
    EXPECT_LE(v["age"].get<int64_t>(), 120);
    ASSERT_TRUE(v["tags"].is_array());
    EXPECT_GE(v["tags"].size(), 1u);
    EXPECT_LE(v["tags"].size(), 3u);
    for (const auto& t : v["tags"]) EXPECT_TRUE(t == "a" || t == "b" || t == "c");
    EXPECT_TRUE(std::regex_match(v["address"]["zip"].get<std::string>(), std::regex(R"(\d{5})")));
    EXPECT_EQ(v["address"].size(), 2u);
    if (v.contains("nickname")) {
      ++with_nickname;
      EXPECT_TRUE(v["nickname"].is_string() || v["nickname"].is_null());
    }
    if (v.contains("email")) {
      ++with_email;
      EXPECT_TRUE(std::regex_match(v["email"].get<std::string>(), email)) << v["email"];
    }
  }
  EXPECT_GT(with_nickname, 0);
  EXPECT_GT(with_email, 0);
}

TEST(JsonSchemaGrammar, IntegerRangesAreExact) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t lo = std::uniform_int_distribution<int64_t>(-3000, 3000)(rng);
    const int64_t hi = lo + std::uniform_int_distribution<int64_t>(0, 2500)(rng);
    ojson schema = {{"type", "integer"}};
    const bool exclusive = trial % 3 == 0;
    if (exclusive) {
      schema["exclusiveMinimum"] = lo - 1;
      schema["exclusiveMaximum"] = hi + 1;
    } else {
      schema["minimum"] = lo;
      schema["maximum"] = hi;
    }
    Grammar g = json_schema_grammar(schema);
    GrammarAutomaton a(g);
    for (int64_t i = lo - 40; i <= hi + 40; ++i)
      ASSERT_EQ(accepts(a, std::to_string(i)), i >= lo && i <= hi) << i << " in [" << lo << ", " << hi << "]";
    EXPECT_FALSE(accepts(a, "0" + std::to_string(std::abs(lo) + 1)));  // no leading zeros
  }
  // One-sided bounds.
  Grammar g = json_schema_grammar(ojson{{"type", "integer"}, {"minimum", 10}});
  GrammarAutomaton a(g);
  EXPECT_TRUE(accepts(a, "10"));
  EXPECT_TRUE(accepts(a, "123456789"));
  EXPECT_FALSE(accepts(a, "9"));
  EXPECT_FALSE(accepts(a, "-11"));
  // Bounds past int64 (the fuzzer's: the 18-digit lengths are the last the
  // grammar spells out, and the next would overflow).
  for (const char* text : {R"({"type": "integer", "minimum": 0, "maximum": 18446744073709551616120})",
                           R"({"type": "integer", "minimum": -18446744073709551616120, "maximum": 5})"}) {
    Grammar big = json_schema_grammar(ojson::parse(text));
    GrammarAutomaton b(big);
    EXPECT_TRUE(accepts(b, "5")) << text;
    EXPECT_FALSE(accepts(b, "05")) << text;
  }
  Grammar big = json_schema_grammar(ojson::parse(R"({"type": "integer", "minimum": 0, "maximum": 1e22})"));
  GrammarAutomaton b(big);
  EXPECT_TRUE(accepts(b, "123456789012345678"));
}

TEST(JsonSchemaGrammar, NumberRangesHoldForEverySample) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t lo = std::uniform_int_distribution<int64_t>(-50, 50)(rng);
    const int64_t hi = lo + std::uniform_int_distribution<int64_t>(1, 80)(rng);
    ojson schema = {{"type", "number"}};
    if (trial % 2) {
      schema["minimum"] = lo;
      schema["maximum"] = hi;
    } else {
      schema["exclusiveMinimum"] = double(lo) - 0.5;
      schema["exclusiveMaximum"] = double(hi) + 0.25;
    }
    int fractional = 0;
    for (const ojson& v : samples(schema, 200, uint64_t(trial))) {
      ASSERT_TRUE(v.is_number());
      const double x = v.get<double>();
      EXPECT_GE(x, double(lo)) << v.dump() << " in " << schema.dump();
      EXPECT_LE(x, double(hi)) << v.dump() << " in " << schema.dump();
      fractional += x != std::floor(x);
    }
    EXPECT_GT(fractional, 0) << schema.dump();
  }
}

TEST(JsonSchemaGrammar, RefsRecurseAndCombinatorsChoose) {
  const ojson schema = ojson::parse(R"({
    "$defs": {"node": {"type": "object", "properties": {"v": {"const": 7}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                       "required": ["v"], "additionalProperties": false}},
    "anyOf": [{"$ref": "#/$defs/node"}, {"type": "boolean"}, {"enum": ["x", 1, null, {"k": [1, 2]}]}]
  })");
  std::function<void(const ojson&)> check_node = [&](const ojson& n) {
    ASSERT_TRUE(n.is_object());
    EXPECT_EQ(n["v"], 7);
    if (n.contains("kids")) {
      EXPECT_LE(n["kids"].size(), 2u);
      for (const auto& k : n["kids"]) check_node(k);
    }
  };
  int nodes = 0;
  for (const ojson& v : samples(schema, 300, 9)) {
    if (v.is_object() && v.contains("v")) {
      ++nodes;
      check_node(v);
    } else {
      EXPECT_TRUE(v.is_boolean() || v == "x" || v == 1 || v.is_null() || v == ojson::parse(R"({"k":[1,2]})")) << v.dump();
    }
  }
  EXPECT_GT(nodes, 0);
}

TEST(JsonSchemaGrammar, AnyValueAndMapsAreJson) {
  for (const ojson& v : samples(ojson::object(), 200, 4)) (void)v;  // parsing is the check
  const ojson map = ojson::parse(R"({"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 3})");
  for (const ojson& v : samples(map, 200, 5)) {
    ASSERT_TRUE(v.is_object());
    EXPECT_LE(v.size(), 3u);
    for (const auto& [k, x] : v.items()) EXPECT_TRUE(x.is_number_integer());
  }
}

TEST(JsonSchemaGrammar, FormatsValidate) {
  const std::pair<const char*, const char*> cases[] = {
      {"date", R"(\d{4}-\d{2}-\d{2})"},
      {"date-time", R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))"},
      {"uuid", R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"},
      {"ipv4", R"((\d{1,3}\.){3}\d{1,3})"},
  };
  for (const auto& [format, shape] : cases) {
    for (const ojson& v : samples(ojson{{"type", "string"}, {"format", format}}, 100, 6)) {
      ASSERT_TRUE(v.is_string());
      const std::string s = v.get<std::string>();
      EXPECT_TRUE(std::regex_match(s, std::regex(shape))) << format << ": " << s;
      if (std::string(format) == "date") {
        const int month = std::stoi(s.substr(5, 2)), day = std::stoi(s.substr(8, 2));
        const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        EXPECT_GE(month, 1);
        EXPECT_LE(month, 12);
        EXPECT_LE(day, days[month - 1]) << s;
      }
    }
  }
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreNamedWithTheirPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "object", "properties": {"a": {"not": {"type": "string"}}}})", "'not' at #/properties/a"},
      {R"({"type": "array", "uniqueItems": true})", "'uniqueItems'"},
      {R"({"type": "number", "multipleOf": 3})", "'multipleOf'"},
      {R"({"type": "string", "format": "idn-email"})", "the format 'idn-email'"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
      {R"({"$ref": "other.json#/x"})", "another document"},
      {R"({"$ref": "#/$defs/missing"})", "points at nothing"},
      {R"({"allOf": [{"type": "string"}, {"minLength": 2}]})", "'allOf' of more than one"},
      {R"({"type": "object", "patternProperties": {"^x": {}}})", "'patternProperties'"},
      {R"({"type": "strin"})", "unknown type 'strin'"},
      {R"(false)", "the schema false"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      json_schema_grammar(ojson::parse(text));
      ADD_FAILURE() << text << " compiled";
    } catch (const UnsupportedSchema& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << text << ": " << e.what();
    }
  }
}

TEST(JsonSchemaGrammar, WhitespaceIsBoundedAndPropertyOrderKept) {
  const ojson schema = ojson::parse(R"({"type": "object", "properties": {"b": {"type": "null"}, "a": {"type": "null"}}, "required": ["a", "b"]})");
  Grammar g = json_schema_grammar(schema);
  GrammarAutomaton a(g);
  EXPECT_TRUE(accepts(a, R"({"b":null,"a":null})"));
  EXPECT_TRUE(accepts(a, "{\n  \"b\": null,\n  \"a\": null\n}"));
  EXPECT_FALSE(accepts(a, R"({"a":null,"b":null})"));  // the schema's order
  EXPECT_FALSE(accepts(a, R"({"b":null})"));           // a is required
  EXPECT_TRUE(accepts(a, "{\n" + std::string(JsonSchemaCompiler::kMaxIndent, ' ') + R"("b": null, "a":null})"));
  EXPECT_FALSE(accepts(a, "{\n" + std::string(JsonSchemaCompiler::kMaxIndent + 1, ' ') + R"("b":null,"a":null})"));
  EXPECT_FALSE(accepts(a, R"({  "b":null,"a":null})"));
  EXPECT_FALSE(accepts(a, "{\n\n\"b\":null,\"a\":null}"));
  EXPECT_FALSE(accepts(a, "{\t\"b\":null,\"a\":null}"));
}

}  // namespace
}  // namespace fathom::grammar
