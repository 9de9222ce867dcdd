#include "server/bounded_json.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "test_util.h"

namespace fathom::server {
namespace {

std::string nested(int depth, std::mt19937_64& rng) {
  std::string open, close;
  for (int i = 0; i < depth; ++i) {
    const bool object = rng() % 2;
    open += object ? "{\"k\":" : "[";
    close.insert(0, object ? "}" : "]");
  }
  return open + "1" + close;
}

std::string object_with_keys(size_t n) {
  std::string s = "{";
  for (size_t i = 0; i < n; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  return s + "}";
}

TEST(BoundedJson, DepthUpToTheLimitParsesBeyondItIsRefused) {
  auto rng = testing::fresh_rng();
  for (int depth : {1, 17, 64}) {
    const auto j = parse_json_bounded(nested(depth, rng));
    EXPECT_FALSE(j.is_discarded()) << depth;
  }
  for (int depth : {65, 1000, 200000}) {
    std::string error;
    EXPECT_TRUE(parse_json_bounded(nested(depth, rng), &error).is_discarded()) << depth;
    EXPECT_NE(error.find("deeper than 64"), std::string::npos) << error;
  }
}

TEST(BoundedJson, KeysPerObjectAndInAllAreCapped) {
  EXPECT_FALSE(parse_json_bounded(object_with_keys(1024)).is_discarded());
  std::string error;
  EXPECT_TRUE(parse_json_bounded(object_with_keys(1025), &error).is_discarded());
  EXPECT_NE(error.find("more than 1024 keys"), std::string::npos) << error;
  // Many small objects: fine per object, too many in all.
  std::string many = "[";
  for (int i = 0; i < 70; ++i) many += (i ? "," : "") + object_with_keys(1000);
  many += "]";
  EXPECT_TRUE(parse_json_bounded(many, &error).is_discarded());
  EXPECT_NE(error.find("65536"), std::string::npos) << error;
  EXPECT_FALSE(parse_json_bounded(many, nullptr, {64, 1024, 100000}).is_discarded());
}

TEST(BoundedJson, ManyKeysParseInLinearishTime) {
  // 65 objects of 1000 keys (the worst the defaults allow) stay far from
  // the seconds one 80k-key object took with ordered_json's linear key search.
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + object_with_keys(1000);
  many += "]";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(parse_json_bounded(many).is_discarded());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(BoundedJson, MalformedTextIsDiscardedWithAReason) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "\xff"}) {
    std::string error;
    EXPECT_TRUE(parse_json_bounded(text, &error).is_discarded()) << text;
    EXPECT_FALSE(error.empty());
  }
  const auto j = parse_json_bounded(R"({"b": 1, "a": [true, null, "x"]})");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.begin().key(), "b");  // request order kept (ordered_json)
  EXPECT_EQ(j["a"][2], "x");
}

}  // namespace
}  // namespace fathom::server
