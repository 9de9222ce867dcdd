#include "io/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fathom {
namespace {

using nlohmann::json;

json base(const std::string& type) {
  return {{"model_type", type},   {"vocab_size", 100},        {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 3}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}};
}

TEST(ModelConfig, DefaultsAndArchitectureRules) {
  ModelConfig llama = parse_model_config(base("llama"));
  EXPECT_EQ(llama.head_dim, 16);
  EXPECT_FALSE(llama.qkv_bias);
  EXPECT_FALSE(llama.qk_norm);
  EXPECT_EQ(llama.rope.type, "default");
  EXPECT_EQ(llama.layer_types.size(), 3u);
  ModelConfig qwen2 = parse_model_config(base("qwen2"));
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias);
  EXPECT_TRUE(parse_model_config(base("qwen3")).qk_norm);
}

TEST(ModelConfig, RopeFromEitherSchema) {
  json legacy = base("llama");
  legacy["rope_theta"] = 500000.0;
  legacy["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  ModelConfig a = parse_model_config(legacy);
  EXPECT_EQ(a.rope.type, "llama3");
  EXPECT_EQ(a.rope.theta, 500000.0);
  EXPECT_EQ(*a.rope.original_max_position_embeddings, 8192);
  json v5 = base("qwen2");
  v5["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}};
  ModelConfig b = parse_model_config(v5);
  EXPECT_EQ(b.rope.type, "yarn");
  EXPECT_EQ(*b.rope.factor, 4.0);
  json bad = base("llama");
  bad["rope_parameters"] = {{"rope_type", "longrope"}};
  EXPECT_THROW(parse_model_config(bad), Error);
}

TEST(ModelConfig, TextConfigNestingAndLayerTypes) {
  json inner = base("qwen3");
  inner["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  inner["sliding_window"] = 128;
  inner["head_dim"] = 32;
  json outer = {{"model_type", "wrapper"}, {"text_config", inner}, {"tie_word_embeddings", true}};
  ModelConfig c = parse_model_config(outer);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.layer_types[1], LayerKind::sliding_attention);
  EXPECT_EQ(*c.sliding_window, 128);
}

TEST(ModelConfig, MistralWindowsEveryLayerAndQwenFromMaxWindowLayers) {
  json m = base("mistral");
  m["sliding_window"] = 16;
  for (LayerKind k : parse_model_config(m).layer_types) EXPECT_EQ(k, LayerKind::sliding_attention);
  json q = base("qwen2");
  q["sliding_window"] = 16;
  q["use_sliding_window"] = true;
  q["max_window_layers"] = 2;
  auto types = parse_model_config(q).layer_types;
  EXPECT_EQ(types[1], LayerKind::full_attention);
  EXPECT_EQ(types[2], LayerKind::sliding_attention);
}

TEST(ModelConfig, BadFieldsAreNamed) {
  json missing = base("llama");
  missing.erase("hidden_size");
  try {
    parse_model_config(missing);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_size"), std::string::npos);
  }
  json wrong = base("llama");
  wrong["num_key_value_heads"] = 3;
  EXPECT_THROW(parse_model_config(wrong), Error);
  json typed = base("llama");
  typed["vocab_size"] = "many";
  EXPECT_THROW(parse_model_config(typed), Error);
}

}  // namespace
}  // namespace fathom
