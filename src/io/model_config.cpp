#include "io/model_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fathom {

using nlohmann::json;

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::full_attention: return "full_attention";
    case LayerKind::sliding_attention: return "sliding_attention";
    case LayerKind::linear_attention: return "linear_attention";
  }
  return "?";
}

namespace {

template <typename T>
T require(const json& j, const char* key) {
  check(j.contains(key) && !j[key].is_null(), "config.json: missing required field \"", key, "\"");
  try {
    return j[key].get<T>();
  } catch (const std::exception&) {
    fail("config.json: field \"", key, "\" has the wrong type: ", j[key].dump());
  }
}

template <typename T>
T optional_field(const json& j, const char* key, T fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const std::exception&) {
    fail("config.json: field \"", key, "\" has the wrong type: ", j[key].dump());
  }
}

std::vector<int64_t> token_id_list(const json& v) {
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (v.is_array()) {
    std::vector<int64_t> ids;
    for (auto& x : v)
      if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
    return ids;
  }
  return {};
}

// rope_parameters (transformers 5) or rope_theta + rope_scaling (older configs).
RopeConfig parse_rope_params(const json& params, const json& c, double default_theta);

RopeConfig parse_rope(const json& c, double default_theta = 10000.0) {
  json params = json::object();
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object()) {
    params = c["rope_parameters"];
    // Models with per-layer-type RoPE nest one dict per layer type; dense
    // decoders use full_attention's.
    if (params.contains("full_attention") && params["full_attention"].is_object())
      params = params["full_attention"];
  } else if (c.contains("rope_scaling") && c["rope_scaling"].is_object()) {
    params = c["rope_scaling"];
  }
  return parse_rope_params(params, c, default_theta);
}

// Gemma 3's sliding layers: rope_parameters.sliding_attention (transformers 5) or
// a default RoPE at rope_local_base_freq (older configs).
RopeConfig parse_local_rope(const json& c) {
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object() &&
      c["rope_parameters"].contains("sliding_attention") && c["rope_parameters"]["sliding_attention"].is_object())
    return parse_rope_params(c["rope_parameters"]["sliding_attention"], json::object(), 10000.0);
  json params = {{"rope_type", "default"}, {"rope_theta", optional_field<double>(c, "rope_local_base_freq", 10000.0)}};
  return parse_rope_params(params, json::object(), 10000.0);
}

RopeConfig parse_rope_params(const json& params, const json& c, double default_theta) {
  RopeConfig r;
  r.theta = optional_field<double>(params, "rope_theta", optional_field<double>(c, "rope_theta", default_theta));
  r.type = optional_field<std::string>(params, "rope_type", optional_field<std::string>(params, "type", "default"));
  r.partial_rotary_factor = optional_field<double>(
      params, "partial_rotary_factor", optional_field<double>(c, "partial_rotary_factor", 1.0));
  if (params.contains("factor") && !params["factor"].is_null()) r.factor = params["factor"].get<double>();
  r.low_freq_factor = optional_field<double>(params, "low_freq_factor", 1.0);
  r.high_freq_factor = optional_field<double>(params, "high_freq_factor", 4.0);
  if (params.contains("original_max_position_embeddings") && !params["original_max_position_embeddings"].is_null())
    r.original_max_position_embeddings = params["original_max_position_embeddings"].get<int64_t>();
  if (params.contains("attention_factor") && !params["attention_factor"].is_null())
    r.attention_factor = params["attention_factor"].get<double>();
  r.beta_fast = optional_field<double>(params, "beta_fast", 32.0);
  r.beta_slow = optional_field<double>(params, "beta_slow", 1.0);
  if (params.contains("mscale") && !params["mscale"].is_null()) r.mscale = params["mscale"].get<double>();
  if (params.contains("mscale_all_dim") && !params["mscale_all_dim"].is_null())
    r.mscale_all_dim = params["mscale_all_dim"].get<double>();
  r.truncate = optional_field<bool>(params, "truncate", true);
  if (r.type == "mrope") r.type = "default";  // text-only use of multimodal rope
  check(r.type == "default" || r.type == "linear" || r.type == "llama3" || r.type == "yarn" ||
            r.type == "proportional",
        "config.json: unsupported rope type \"", r.type, "\" (supported: default, linear, llama3, yarn, proportional)");
  if (r.type != "default" && r.type != "proportional")
    check(r.factor.has_value() || r.type == "yarn", "config.json: rope type ", r.type, " needs a factor");
  return r;
}

LayerKind parse_layer_kind(const std::string& s) {
  if (s == "full_attention") return LayerKind::full_attention;
  if (s == "sliding_attention") return LayerKind::sliding_attention;
  if (s == "linear_attention") return LayerKind::linear_attention;
  fail("config.json: unknown layer type \"", s, "\" in layer_types");
}

// layer_head_dim / layer_kv_heads from per_layer_config (keys are layer
// indices, possibly zero-padded: "05") and kv_source_layer from
// num_kv_shared_layers.
void parse_per_layer_shapes(const json& c, ModelConfig& m) {
  m.layer_head_dim.assign(size_t(m.num_layers), m.head_dim);
  m.layer_kv_heads.assign(size_t(m.num_layers), m.num_kv_heads);
  if (m.model_type == "gemma4_text" && !c.contains("per_layer_config")) {
    // Configs without per_layer_config: transformers gives every global layer
    // global_head_dim (default 512) and, with attention_k_eq_v,
    // num_global_key_value_heads.
    const int64_t global_head_dim = optional_field<int64_t>(c, "global_head_dim", 512);
    const int64_t global_kv_heads = m.attention_k_eq_v ? optional_field<int64_t>(c, "num_global_key_value_heads", m.num_kv_heads) : m.num_kv_heads;
    for (int64_t i = 0; i < m.num_layers; ++i)
      if (m.layer_types[size_t(i)] == LayerKind::full_attention) {
        m.layer_head_dim[size_t(i)] = global_head_dim;
        m.layer_kv_heads[size_t(i)] = global_kv_heads;
      }
  }
  if (c.contains("per_layer_config") && c["per_layer_config"].is_object()) {
    for (const auto& [key, value] : c["per_layer_config"].items()) {
      int64_t layer = -1;
      try {
        size_t used = 0;
        layer = std::stoll(key, &used);
        if (used != key.size()) layer = -1;
      } catch (const std::exception&) {
      }
      check(layer >= 0 && layer < m.num_layers, "config.json: per_layer_config key \"", key,
            "\" is not a layer index below ", m.num_layers);
      check(value.is_object(), "config.json: per_layer_config[\"", key, "\"] must be an object");
      m.layer_head_dim[size_t(layer)] = optional_field<int64_t>(value, "head_dim", m.head_dim);
      m.layer_kv_heads[size_t(layer)] = optional_field<int64_t>(value, "num_key_value_heads", m.num_kv_heads);
      check(m.layer_head_dim[size_t(layer)] > 0 && m.layer_head_dim[size_t(layer)] % 2 == 0 &&
                m.layer_kv_heads[size_t(layer)] > 0 && m.num_heads % m.layer_kv_heads[size_t(layer)] == 0,
            "config.json: per_layer_config[\"", key, "\"] has a bad head_dim or num_key_value_heads");
    }
  }
  m.kv_source_layer.resize(size_t(m.num_layers));
  const int64_t first_shared = m.num_layers - m.num_kv_shared_layers;
  for (int64_t i = 0; i < m.num_layers; ++i) {
    m.kv_source_layer[size_t(i)] = i;
    if (i < first_shared) continue;
    int64_t source = -1;
    for (int64_t j = first_shared - 1; j >= 0 && source < 0; --j)
      if (m.layer_types[size_t(j)] == m.layer_types[size_t(i)]) source = j;
    check(source >= 0, "config.json: KV-shared layer ", i, " (", layer_kind_name(m.layer_types[size_t(i)]),
          ") has no earlier layer of its type to share with");
    m.kv_source_layer[size_t(i)] = source;
  }
}

}  // namespace

ModelConfig parse_model_config(const json& root) {
  check(root.is_object(), "config.json: not a JSON object");
  // Multimodal folders nest the language model's config under text_config.
  const json& c = root.contains("text_config") && root["text_config"].is_object() ? root["text_config"] : root;
  ModelConfig m;
  m.model_type = optional_field<std::string>(c, "model_type", optional_field<std::string>(root, "model_type", ""));
  check(!m.model_type.empty(), "config.json: missing \"model_type\"");
  m.vocab_size = require<int64_t>(c, "vocab_size");
  m.hidden_size = require<int64_t>(c, "hidden_size");
  m.intermediate_size = require<int64_t>(c, "intermediate_size");
  m.num_layers = require<int64_t>(c, "num_hidden_layers");
  m.num_heads = require<int64_t>(c, "num_attention_heads");
  m.num_kv_heads = optional_field<int64_t>(c, "num_key_value_heads", m.num_heads);
  check(m.vocab_size > 0 && m.hidden_size > 0 && m.intermediate_size > 0 && m.num_layers > 0 &&
            m.num_heads > 0 && m.num_kv_heads > 0,
        "config.json: sizes must be positive");
  check(m.num_heads % m.num_kv_heads == 0, "config.json: num_attention_heads (", m.num_heads,
        ") is not a multiple of num_key_value_heads (", m.num_kv_heads, ")");
  m.head_dim = optional_field<int64_t>(c, "head_dim", m.hidden_size / m.num_heads);
  check(m.head_dim > 0 && m.head_dim % 2 == 0, "config.json: head_dim must be positive and even, got ", m.head_dim);
  m.rms_norm_eps = optional_field<double>(c, "rms_norm_eps", 1e-6);
  m.max_position_embeddings = optional_field<int64_t>(c, "max_position_embeddings", 4096);
  m.tie_word_embeddings = optional_field<bool>(c, "tie_word_embeddings", optional_field<bool>(root, "tie_word_embeddings", false));
  const bool gemma3 = m.model_type == "gemma3_text";
  const bool gemma4 = m.model_type == "gemma4_text";
  const bool qwen_next = m.model_type == "qwen3_next" || m.model_type == "qwen3_5_text";
  m.rope = parse_rope(c, gemma3 ? 1000000.0 : 10000.0);
  check(m.rope.type == "proportional" || m.rotary_dim() % 2 == 0, "config.json: rotary dim ", m.rotary_dim(), " must be even");
  check(m.rotary_dim() <= m.head_dim, "config.json: rotary dim ", m.rotary_dim(),
        " must be at most head_dim");

  const bool attention_bias = optional_field<bool>(c, "attention_bias", false);
  m.mlp_bias = optional_field<bool>(c, "mlp_bias", false);
  if (m.model_type == "qwen2") {
    m.qkv_bias = true;  // Qwen2 always has q/k/v biases and none on o_proj
    m.o_bias = false;
  } else {
    m.qkv_bias = attention_bias;
    m.o_bias = attention_bias;
  }
  m.qk_norm = m.model_type == "qwen3" || m.model_type == "qwen3_moe" || gemma3 || gemma4 || qwen_next;

  if (m.model_type == "qwen3_moe" || qwen_next) {
    m.num_experts = optional_field<int64_t>(c, "num_experts", optional_field<int64_t>(c, "num_local_experts", 0));
    m.num_experts_per_tok = optional_field<int64_t>(c, "num_experts_per_tok", 0);
    m.moe_intermediate_size = optional_field<int64_t>(c, "moe_intermediate_size", 0);
    m.norm_topk_prob = optional_field<bool>(c, "norm_topk_prob", false);
    m.decoder_sparse_step = optional_field<int64_t>(c, "decoder_sparse_step", 1);
    m.mlp_only_layers = optional_field<std::vector<int64_t>>(c, "mlp_only_layers", {});
    check(m.num_experts >= 0 && m.decoder_sparse_step > 0, "config.json: num_experts must be >= 0 and decoder_sparse_step > 0");
    if (m.num_experts > 0)
      check(m.num_experts_per_tok > 0 && m.num_experts_per_tok <= m.num_experts && m.moe_intermediate_size > 0,
            "config.json: num_experts_per_tok (", m.num_experts_per_tok, ") must be in [1, num_experts = ",
            m.num_experts, "] and moe_intermediate_size (", m.moe_intermediate_size, ") positive");
  }
  if (qwen_next) {
    m.attn_output_gate = true;
    m.shared_expert_intermediate_size = optional_field<int64_t>(c, "shared_expert_intermediate_size", 0);
    ModelConfig::LinearAttention la;
    la.num_key_heads = require<int64_t>(c, "linear_num_key_heads");
    la.num_value_heads = require<int64_t>(c, "linear_num_value_heads");
    la.key_head_dim = require<int64_t>(c, "linear_key_head_dim");
    la.value_head_dim = require<int64_t>(c, "linear_value_head_dim");
    la.conv_kernel = require<int64_t>(c, "linear_conv_kernel_dim");
    check(la.num_key_heads > 0 && la.num_value_heads > 0 && la.key_head_dim > 0 && la.value_head_dim > 0 &&
              la.conv_kernel > 0,
          "config.json: linear attention sizes must be positive");
    check(la.num_value_heads % la.num_key_heads == 0, "config.json: linear_num_value_heads (", la.num_value_heads,
          ") is not a multiple of linear_num_key_heads (", la.num_key_heads, ")");
    m.linear_attention = la;
  }
  if (gemma4) {
    m.hidden_size_per_layer_input = optional_field<int64_t>(c, "hidden_size_per_layer_input", 0);
    m.vocab_size_per_layer_input = optional_field<int64_t>(c, "vocab_size_per_layer_input", m.vocab_size);
    m.attention_k_eq_v = optional_field<bool>(c, "attention_k_eq_v", false);
    m.num_kv_shared_layers = optional_field<int64_t>(c, "num_kv_shared_layers", 0);
    m.use_double_wide_mlp = optional_field<bool>(c, "use_double_wide_mlp", false);
    m.enable_moe_block = optional_field<bool>(c, "enable_moe_block", false);
    check(m.num_kv_shared_layers >= 0 && m.num_kv_shared_layers < m.num_layers,
          "config.json: num_kv_shared_layers (", m.num_kv_shared_layers, ") must be in [0, num_hidden_layers)");
    if (m.enable_moe_block) {
      m.num_experts = require<int64_t>(c, "num_experts");
      m.num_experts_per_tok = require<int64_t>(c, "top_k_experts");
      m.moe_intermediate_size = require<int64_t>(c, "moe_intermediate_size");
      check(m.num_experts > 0 && m.num_experts_per_tok > 0 && m.num_experts_per_tok <= m.num_experts &&
                m.moe_intermediate_size > 0,
            "config.json: top_k_experts (", m.num_experts_per_tok, ") must be in [1, num_experts = ", m.num_experts,
            "] and moe_intermediate_size (", m.moe_intermediate_size, ") positive");
      m.decoder_sparse_step = 1;
    }
  }
  if (gemma3 || gemma4) {
    m.local_rope = parse_local_rope(c);
    // Gemma 4 scales attention by 1 (its q/k norms fix the magnitude).
    m.query_pre_attn_scalar = optional_field<double>(c, "query_pre_attn_scalar", gemma4 ? 1.0 : 256.0);
    if (c.contains("attn_logit_softcapping") && c["attn_logit_softcapping"].is_number())
      m.attn_logit_softcapping = c["attn_logit_softcapping"].get<double>();
    if (c.contains("final_logit_softcapping") && c["final_logit_softcapping"].is_number())
      m.final_logit_softcapping = c["final_logit_softcapping"].get<double>();
    m.hidden_activation = optional_field<std::string>(c, "hidden_activation", "gelu_pytorch_tanh");
  } else {
    m.hidden_activation = optional_field<std::string>(c, "hidden_act", "silu");
  }

  if (c.contains("sliding_window") && c["sliding_window"].is_number_integer())
    m.sliding_window = c["sliding_window"].get<int64_t>();
  if (c.contains("layer_types") && c["layer_types"].is_array()) {
    for (auto& t : c["layer_types"]) {
      check(t.is_string(), "config.json: layer_types entries must be strings");
      m.layer_types.push_back(parse_layer_kind(t.get<std::string>()));
    }
    check(int64_t(m.layer_types.size()) == m.num_layers, "config.json: layer_types has ", m.layer_types.size(),
          " entries for ", m.num_layers, " layers");
  } else {
    // Older configs: Mistral windows every layer; Qwen2/3 window layers from
    // max_window_layers on when use_sliding_window is set (Qwen3-MoE: every
    // layer); Gemma 3 makes every sliding_window_pattern-th layer global.
    const bool qwen = m.model_type == "qwen2" || m.model_type == "qwen3" || m.model_type == "qwen3_moe";
    const bool use_sliding = qwen ? optional_field<bool>(c, "use_sliding_window", false) : m.sliding_window.has_value();
    const int64_t first_sliding =
        qwen && m.model_type != "qwen3_moe" ? optional_field<int64_t>(c, "max_window_layers", 0) : 0;
    const int64_t pattern = optional_field<int64_t>(c, "sliding_window_pattern", optional_field<int64_t>(c, "_sliding_window_pattern", 6));
    for (int64_t i = 0; i < m.num_layers; ++i) {
      bool sliding = use_sliding && m.sliding_window && i >= first_sliding;
      if (gemma3 || gemma4) sliding = m.sliding_window && pattern > 0 && (i + 1) % pattern != 0;
      m.layer_types.push_back(sliding ? LayerKind::sliding_attention : LayerKind::full_attention);
    }
  }
  for (LayerKind k : m.layer_types)
    check(k != LayerKind::linear_attention || m.linear_attention.has_value(), "config.json: model_type ",
          m.model_type, " has linear_attention layers but no linear attention sizes (linear_num_key_heads, ...)");
  for (LayerKind k : m.layer_types)
    if (k == LayerKind::sliding_attention)
      check(m.sliding_window.has_value() && *m.sliding_window > 0,
            "config.json: sliding_attention layers need a positive sliding_window");

  parse_per_layer_shapes(c, m);

  if (c.contains("eos_token_id")) m.eos_token_ids = token_id_list(c["eos_token_id"]);
  else if (root.contains("eos_token_id")) m.eos_token_ids = token_id_list(root["eos_token_id"]);
  if (c.contains("bos_token_id") && c["bos_token_id"].is_number_integer()) m.bos_token_id = c["bos_token_id"].get<int64_t>();
  m.weights_dtype = optional_field<std::string>(c, "dtype", optional_field<std::string>(c, "torch_dtype", ""));
  return m;
}

bool ModelConfig::is_sparse_moe_layer(int64_t layer) const {
  if (num_experts <= 0) return false;
  for (int64_t l : mlp_only_layers)
    if (l == layer) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

ModelConfig load_model_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  check(fs::is_directory(model_dir), "model folder not found: ", model_dir);
  const fs::path path = fs::path(model_dir) / "config.json";
  std::ifstream in(path);
  check(bool(in), "cannot read ", path.string());
  json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    fail(path.string(), ": invalid JSON: ", e.what());
  }
  return parse_model_config(j);
}

}  // namespace fathom
