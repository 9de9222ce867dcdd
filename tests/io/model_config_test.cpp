#include "io/model_config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/generation_config.h"

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

// parse_model_config(j) must throw fathom::Error whose message holds every one of `parts`.
void expect_config_error(const json& j, const std::vector<std::string>& parts) {
  try {
    parse_model_config(j);
    ADD_FAILURE() << "accepted: " << j.dump();
  } catch (const Error& e) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "\"" << part << "\" not in: " << e.what();
  }
}

TEST(ModelConfigHostile, SizesAreRangeCheckedBeforeAnythingIsAllocated) {
  struct Case {
    const char* field;
    json value;
    const char* shown;  // how the message shows the value
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      {"max_position_embeddings", -5, "-5"},
      {"max_position_embeddings", 0, "0"},
      {"max_position_embeddings", int64_t(1) << 40, "1099511627776"},
      {"num_hidden_layers", 1000000000, "1000000000"},
      {"num_hidden_layers", 0, "0"},
      {"num_hidden_layers", 3.5, "3.5"},
      {"num_hidden_layers", "3", "\"3\""},
      {"num_hidden_layers", true, "true"},
      {"num_hidden_layers", json::array({3}), "[3]"},
      {"vocab_size", -1, "-1"},
      {"vocab_size", uint64_t(18446744073709551615ull), "18446744073709551615"},
      {"vocab_size", int64_t(1) << 40, "1099511627776"},
      {"hidden_size", 1 << 20, "1048576"},
      {"intermediate_size", 0, "0"},
      {"num_attention_heads", 100000, "100000"},
      {"num_key_value_heads", 8, "8"},  // more kv heads than heads (4)
      {"num_key_value_heads", 0, "0"},
      {"head_dim", 1 << 20, "1048576"},
      {"head_dim", -16, "-16"},
      {"rms_norm_eps", -1.0, "-1"},
      {"rms_norm_eps", "tiny", "\"tiny\""},
      {"sliding_window", -3, "-3"},
      {"sliding_window", "wide", "\"wide\""},
      {"rope_theta", 0.0, "0"},
      {"rope_theta", -10000.0, "-10000"},
      {"partial_rotary_factor", 2.0, "2"},
      {"partial_rotary_factor", 0.01, ""},  // rotary dim 0
      {"eos_token_id", -1, "-1"},
      {"eos_token_id", json::array({1, "x"}), "\"x\""},
      {"bos_token_id", int64_t(1) << 40, "1099511627776"},
      {"tie_word_embeddings", "yes", "\"yes\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.field) + " = " + c.value.dump());
    json j = base("llama");
    j[c.field] = c.value;
    if (std::string(c.field) == "sliding_window") j["model_type"] = "mistral";
    expect_config_error(j, {c.field == std::string("partial_rotary_factor") && !*c.shown ? "rotary dim" : c.field, c.shown});
  }
  // NaN cannot be written in JSON but can be in a json value built in memory.
  json j = base("llama");
  j["rms_norm_eps"] = nan;
  expect_config_error(j, {"rms_norm_eps"});
  // The error names the field even when it is nested under text_config.
  expect_config_error({{"model_type", "gemma3"}, {"text_config", [] {
                         json t = base("gemma3_text");
                         t["max_position_embeddings"] = -5;
                         return t;
                       }()}},
                      {"max_position_embeddings", "-5"});
  // The limits are inclusive and allow real models.
  json big = base("llama");
  big["max_position_embeddings"] = config_limits::kMaxPositions;
  big["num_hidden_layers"] = 128;
  big["vocab_size"] = 262144;
  EXPECT_EQ(parse_model_config(big).max_position_embeddings, config_limits::kMaxPositions);
}

TEST(ModelConfigHostile, RopeParametersMustBeFiniteAndPositive) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"rope_type", "linear"}, {"factor", 0.0}}, "factor"},
      {{{"rope_type", "linear"}, {"factor", -2.0}}, "factor"},
      {{{"rope_type", "linear"}, {"factor", "big"}}, "factor"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 0.0}}, "beta_fast"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", -1}}, "original_max_position_embeddings"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", -1.0}}, "attention_factor"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"mscale", "x"}}, "mscale"},
      {{{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 1.0}}, "rope_theta"},
      {{{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 4.0}}, "high_freq_factor"},
      {{{"rope_type", 7}}, "rope_type"},
      {{{"rope_theta", -1.0}}, "rope_parameters.rope_theta"},
  };
  for (const auto& [params, field] : cases) {
    SCOPED_TRACE(params.dump());
    json j = base("llama");
    j["rope_parameters"] = params;
    expect_config_error(j, {field});
  }
  json legacy = base("llama");
  legacy["rope_scaling"] = {{"rope_type", "linear"}, {"factor", -1.0}};
  expect_config_error(legacy, {"rope_scaling.factor"});
  json g3 = base("gemma3_text");
  g3["rope_local_base_freq"] = -1.0;
  expect_config_error(g3, {"rope_local_base_freq"});
  g3.erase("rope_local_base_freq");
  g3["final_logit_softcapping"] = 0.0;  // would divide by zero
  expect_config_error(g3, {"final_logit_softcapping"});
  g3["final_logit_softcapping"] = nullptr;  // null: no capping
  g3["query_pre_attn_scalar"] = -1;
  expect_config_error(g3, {"query_pre_attn_scalar"});
}

TEST(ModelConfigHostile, ArchitectureSpecificFieldsAreChecked) {
  json moe = base("qwen3_moe");
  moe["num_experts"] = 8;
  moe["num_experts_per_tok"] = 2;
  moe["moe_intermediate_size"] = 32;
  parse_model_config(moe);
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"num_experts", 1 << 30}, {"num_experts", -1}, {"num_experts_per_tok", 2.5},
           {"moe_intermediate_size", int64_t(1) << 40}, {"decoder_sparse_step", 0},
           {"mlp_only_layers", json::array({1, 99})}, {"mlp_only_layers", "all"}}) {
    SCOPED_TRACE(field + " = " + value.dump());
    json j = moe;
    j[field] = value;
    expect_config_error(j, {field});
  }

  json next = base("qwen3_next");
  next["linear_num_key_heads"] = 2;
  next["linear_num_value_heads"] = 4;
  next["linear_key_head_dim"] = 8;
  next["linear_value_head_dim"] = 8;
  next["linear_conv_kernel_dim"] = 4;
  next["layer_types"] = {"linear_attention", "full_attention", "linear_attention"};
  parse_model_config(next);
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"linear_num_key_heads", 0}, {"linear_key_head_dim", 1 << 20}, {"linear_conv_kernel_dim", 1000000},
           {"linear_value_head_dim", "8"}, {"shared_expert_intermediate_size", -4}, {"layer_types", "linear_attention"},
           {"layer_types", json::array({"full_attention", 3, "full_attention"})}}) {
    SCOPED_TRACE(field + " = " + value.dump());
    json j = next;
    j[field] = value;
    expect_config_error(j, {field});
  }
  // A layer_types list as long as a hostile num_hidden_layers would be is refused by its length.
  json many = next;
  many["layer_types"] = json::array();
  for (int i = 0; i < 5000; ++i) many["layer_types"].push_back("full_attention");
  expect_config_error(many, {"layer_types"});

  json g4 = base("gemma4_text");
  g4["sliding_window"] = 8;
  g4["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention"};
  parse_model_config(g4);
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"num_kv_shared_layers", -1}, {"num_kv_shared_layers", 3}, {"hidden_size_per_layer_input", -2},
           {"vocab_size_per_layer_input", int64_t(1) << 40}, {"global_head_dim", 3}, {"global_head_dim", 1 << 20}}) {
    SCOPED_TRACE(field + " = " + value.dump());
    json j = g4;
    j[field] = value;
    expect_config_error(j, {field});
  }
  for (const json& per_layer : {json{{"2", {{"head_dim", 1 << 20}}}}, json{{"2", {{"head_dim", "big"}}}},
                                json{{"2", {{"num_key_value_heads", 0}}}}, json{{"2", {{"num_key_value_heads", 3}}}},
                                json{{"-1", json::object()}}, json{{"+2", json::object()}}, json{{"0x2", json::object()}},
                                json{{"99999999999999999999", json::object()}}, json{{"2", 5}}}) {
    SCOPED_TRACE(per_layer.dump());
    json j = g4;
    j["per_layer_config"] = per_layer;
    EXPECT_THROW(parse_model_config(j), Error);
  }
  json g4moe = g4;
  g4moe["enable_moe_block"] = true;
  g4moe["num_experts"] = 4;
  g4moe["top_k_experts"] = 5;
  g4moe["moe_intermediate_size"] = 16;
  expect_config_error(g4moe, {"top_k_experts", "5"});
}

TEST(ModelConfigHostile, DeeplyNestedConfigIsAnErrorNotAStackOverflow) {
  const std::string deep = R"({"model_type": "llama", "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  try {
    parse_model_config_text(deep);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nests deeper"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_model_config_text("{\"model_type\": "), Error);  // truncated
  EXPECT_THROW(parse_model_config_text("]"), Error);
  EXPECT_EQ(parse_model_config_text(base("qwen3").dump()).model_type, "qwen3");

  // Through the folder: config.json and generation_config.json both.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fathom_test_deep_config_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << deep;
  EXPECT_THROW(load_model_config(dir.string()), Error);
  std::ofstream(dir / "generation_config.json") << deep;
  EXPECT_THROW(load_generation_config(dir.string()), Error);
  fs::remove(dir / "config.json");
  fs::create_directories(dir / "config.json");  // a folder where the file should be
  EXPECT_THROW(load_model_config(dir.string()), Error);
  fs::remove_all(dir);
}

TEST(GenerationConfigHostile, FieldsAreTypeAndRangeChecked) {
  const GenerationConfig g = parse_generation_config_text(
      R"({"eos_token_id": [1, 106], "bos_token_id": 2, "temperature": 0.7, "top_p": 0.95, "top_k": 64, "do_sample": true})");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(*g.bos_token_id, 2);
  EXPECT_EQ(*g.top_k, 64);
  EXPECT_TRUE(parse_generation_config_text(R"({"eos_token_id": null})").eos_token_ids.empty());
  for (const std::string& text :
       {std::string(R"({"eos_token_id": -1})"), std::string(R"({"eos_token_id": 1e30})"),
        std::string(R"({"eos_token_id": [1, "2"]})"), std::string(R"({"eos_token_id": 18446744073709551615})"),
        std::string(R"({"bos_token_id": 1.5})"), std::string(R"({"temperature": -1})"),
        std::string(R"({"temperature": "hot"})"), std::string(R"({"top_p": 2})"), std::string(R"({"top_k": -5})"),
        std::string(R"({"top_k": 0.5})"), std::string("[]"), std::string("{"), std::string(100000, '[')}) {
    SCOPED_TRACE(text.substr(0, 60));
    EXPECT_THROW(parse_generation_config_text(text, "gen.json"), Error);
  }
  json many = {{"eos_token_id", json::array()}};
  for (int i = 0; i < 5000; ++i) many["eos_token_id"].push_back(i);
  EXPECT_THROW(parse_generation_config_text(many.dump()), Error);
}

}  // namespace
}  // namespace fathom
