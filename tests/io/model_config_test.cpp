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

TEST(ModelConfig, Qwen3MoeFieldsAndSparseLayerRule) {
  json j = base("qwen3_moe");
  j["num_hidden_layers"] = 6;
  j["num_local_experts"] = 8;  // transformers 5 writes num_local_experts
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  j["norm_topk_prob"] = true;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  j["sliding_window"] = 16;  // ignored without use_sliding_window
  ModelConfig m = parse_model_config(j);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.num_experts_per_tok, 2);
  EXPECT_EQ(m.moe_intermediate_size, 32);
  EXPECT_TRUE(m.norm_topk_prob);
  EXPECT_TRUE(m.qk_norm);
  const std::vector<bool> sparse = {false, true, false, false, false, true};  // (i+1) % 2 == 0, not layer 3
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(m.is_sparse_moe_layer(i), sparse[i]) << "layer " << i;
  for (LayerKind k : m.layer_types) EXPECT_EQ(k, LayerKind::full_attention);
  j["num_experts_per_tok"] = 9;
  EXPECT_THROW(parse_model_config(j), Error);
  EXPECT_FALSE(parse_model_config(base("qwen3")).is_sparse_moe_layer(1));
}

TEST(ModelConfig, Gemma3RopePerLayerTypeAndLegacyFields) {
  json v5 = base("gemma3_text");
  v5["sliding_window"] = 8;
  v5["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention"};
  v5["query_pre_attn_scalar"] = 24;
  v5["final_logit_softcapping"] = 30.0;
  v5["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  ModelConfig a = parse_model_config(v5);
  EXPECT_EQ(a.rope.type, "linear");
  EXPECT_EQ(*a.rope.factor, 8.0);
  EXPECT_EQ(a.rope.theta, 1e6);
  ASSERT_TRUE(a.local_rope.has_value());
  EXPECT_EQ(a.local_rope->type, "default");
  EXPECT_EQ(a.local_rope->theta, 1e4);
  EXPECT_EQ(*a.query_pre_attn_scalar, 24.0);
  EXPECT_EQ(*a.final_logit_softcapping, 30.0);
  EXPECT_FALSE(a.attn_logit_softcapping.has_value());
  EXPECT_EQ(a.hidden_activation, "gelu_pytorch_tanh");
  EXPECT_TRUE(a.qk_norm);

  // Older configs: rope_theta + rope_scaling for global layers, rope_local_base_freq
  // for local ones, and every sliding_window_pattern-th layer global.
  json legacy = base("gemma3_text");
  legacy["num_hidden_layers"] = 6;
  legacy["sliding_window"] = 8;
  legacy["sliding_window_pattern"] = 3;
  legacy["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  legacy["rope_local_base_freq"] = 5000.0;
  ModelConfig b = parse_model_config(legacy);
  EXPECT_EQ(b.rope.theta, 1e6);  // Gemma 3's default
  EXPECT_EQ(b.rope.type, "linear");
  EXPECT_EQ(b.local_rope->theta, 5000.0);
  const std::vector<LayerKind> kinds = {LayerKind::sliding_attention, LayerKind::sliding_attention,
                                        LayerKind::full_attention,    LayerKind::sliding_attention,
                                        LayerKind::sliding_attention, LayerKind::full_attention};
  EXPECT_EQ(b.layer_types, kinds);

  // Multimodal folders nest the text model under text_config.
  json nested = {{"model_type", "gemma3"}, {"text_config", v5}};
  EXPECT_EQ(parse_model_config(nested).model_type, "gemma3_text");
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


TEST(ModelConfig, Gemma4PerLayerShapesAndKvSharing) {
  json c = base("gemma4_text");
  c["num_hidden_layers"] = 6;
  c["head_dim"] = 16;
  c["sliding_window"] = 8;
  c["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention",
                      "sliding_attention", "sliding_attention", "full_attention"};
  c["num_kv_shared_layers"] = 2;
  c["per_layer_config"] = {{"2", {{"head_dim", 32}}}, {"05", {{"head_dim", 32}, {"num_key_value_heads", 1}}}};
  const ModelConfig m = parse_model_config(c);
  EXPECT_EQ(m.layer_head_dim, (std::vector<int64_t>{16, 16, 32, 16, 16, 32}));
  EXPECT_EQ(m.layer_kv_heads, (std::vector<int64_t>{2, 2, 2, 2, 2, 1}));
  // Layer 4 (sliding) reads layer 3's cache, layer 5 (full) layer 2's.
  EXPECT_EQ(m.kv_source_layer, (std::vector<int64_t>{0, 1, 2, 3, 3, 2}));
  EXPECT_TRUE(m.owns_kv(3));
  EXPECT_FALSE(m.owns_kv(4));
  EXPECT_DOUBLE_EQ(*m.query_pre_attn_scalar, 1.0);

  // Without per_layer_config: global layers take global_head_dim, and with
  // attention_k_eq_v num_global_key_value_heads.
  c.erase("per_layer_config");
  c["global_head_dim"] = 64;
  c["num_global_key_value_heads"] = 1;
  EXPECT_EQ(parse_model_config(c).layer_head_dim, (std::vector<int64_t>{16, 16, 64, 16, 16, 64}));
  EXPECT_EQ(parse_model_config(c).layer_kv_heads[2], 2);
  c["attention_k_eq_v"] = true;
  EXPECT_EQ(parse_model_config(c).layer_kv_heads, (std::vector<int64_t>{2, 2, 1, 2, 2, 1}));

  c["per_layer_config"] = {{"9", {{"head_dim", 32}}}};
  EXPECT_THROW(parse_model_config(c), Error);  // no layer 9
  c["per_layer_config"] = json::object();
  c["num_kv_shared_layers"] = 5;  // layer 2 (full) has no earlier full layer to read
  EXPECT_THROW(parse_model_config(c), Error);
}

TEST(ModelConfig, LinearAttentionNeedsItsSizes) {
  json c = base("qwen3_next");
  c["layer_types"] = {"linear_attention", "full_attention", "linear_attention"};
  EXPECT_THROW(parse_model_config(c), Error);
  c["linear_num_key_heads"] = 2;
  c["linear_num_value_heads"] = 3;  // not a multiple of the key heads
  c["linear_key_head_dim"] = 8;
  c["linear_value_head_dim"] = 8;
  c["linear_conv_kernel_dim"] = 4;
  EXPECT_THROW(parse_model_config(c), Error);
  c["linear_num_value_heads"] = 4;
  const ModelConfig m = parse_model_config(c);
  EXPECT_EQ(m.linear_attention->conv_dim(), 2 * 16 + 32);
  EXPECT_TRUE(m.attn_output_gate);
  EXPECT_FALSE(m.owns_kv(0));
  EXPECT_TRUE(m.owns_kv(1));
}

}  // namespace
}  // namespace fathom
