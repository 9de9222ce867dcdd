#include "io/model_config.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

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

namespace lim = config_limits;

bool has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A JSON integer (not a float, bool or string) in [lo, hi].
int64_t as_int(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  const bool representable = v.is_number_integer() &&
                             !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX));
  check(representable, "config.json: field \"", field, "\" must be an integer in [", lo, ", ", hi, "], got ",
        json_excerpt(v));
  const int64_t x = v.get<int64_t>();
  check(x >= lo && x <= hi, "config.json: field \"", field, "\" = ", x, " is out of range [", lo, ", ", hi, "]");
  return x;
}

int64_t int_field(const json& j, const char* key, int64_t lo, int64_t hi) {
  check(has(j, key), "config.json: missing required field \"", key, "\"");
  return as_int(j[key], key, lo, hi);
}

int64_t int_field_or(const json& j, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  return has(j, key) ? as_int(j[key], key, lo, hi) : fallback;
}

// A finite JSON number in [lo, hi]; lo_open excludes lo itself (for "positive").
double as_real(const json& v, const std::string& field, double lo, double hi, bool lo_open = false) {
  check(v.is_number(), "config.json: field \"", field, "\" must be a number, got ", json_excerpt(v));
  const double x = v.get<double>();
  check(std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi, "config.json: field \"", field, "\" = ",
        json_excerpt(v), " is out of range ", lo_open ? "(" : "[", lo, ", ", hi, "]");
  return x;
}

constexpr double kHuge = 1e300;  // "finite" as an upper bound

double real_field_or(const json& j, const char* key, double fallback, double lo, double hi, bool lo_open = false,
                     const std::string& prefix = "") {
  return has(j, key) ? as_real(j[key], prefix + key, lo, hi, lo_open) : fallback;
}

std::optional<double> optional_real(const json& j, const char* key, double lo, double hi, bool lo_open,
                                    const std::string& prefix = "") {
  if (!has(j, key)) return std::nullopt;
  return as_real(j[key], prefix + key, lo, hi, lo_open);
}

template <typename T>
T optional_field(const json& j, const char* key, T fallback) {
  if (!has(j, key)) return fallback;
  try {
    return j[key].get<T>();
  } catch (const std::exception&) {
    fail("config.json: field \"", key, "\" has the wrong type: ", json_excerpt(j[key]));
  }
}

// eos_token_id: one id or a list; every entry a valid token id.
std::vector<int64_t> token_id_list(const json& v, const char* field) {
  if (v.is_null()) return {};
  if (!v.is_array()) return {as_int(v, field, 0, lim::kMaxTokenId)};
  check(v.size() <= lim::kMaxTokenIdList, "config.json: field \"", field, "\" lists ", v.size(),
        " ids (at most ", lim::kMaxTokenIdList, ")");
  std::vector<int64_t> ids;
  for (const auto& x : v) ids.push_back(as_int(x, field, 0, lim::kMaxTokenId));
  return ids;
}

// rope_parameters (transformers 5) or rope_theta + rope_scaling (older configs);
// prefix names where params came from, for errors.
RopeConfig parse_rope_params(const json& params, const std::string& prefix, const json& c, double default_theta);

RopeConfig parse_rope(const json& c, double default_theta = 10000.0) {
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object()) {
    const json& params = c["rope_parameters"];
    // Models with per-layer-type RoPE nest one dict per layer type; dense
    // decoders use full_attention's.
    if (params.contains("full_attention") && params["full_attention"].is_object())
      return parse_rope_params(params["full_attention"], "rope_parameters.full_attention.", c, default_theta);
    return parse_rope_params(params, "rope_parameters.", c, default_theta);
  }
  if (c.contains("rope_scaling") && c["rope_scaling"].is_object())
    return parse_rope_params(c["rope_scaling"], "rope_scaling.", c, default_theta);
  return parse_rope_params(json::object(), "", c, default_theta);
}

// Gemma 3's sliding layers: rope_parameters.sliding_attention (transformers 5) or
// a default RoPE at rope_local_base_freq (older configs).
RopeConfig parse_local_rope(const json& c) {
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object() &&
      c["rope_parameters"].contains("sliding_attention") && c["rope_parameters"]["sliding_attention"].is_object())
    return parse_rope_params(c["rope_parameters"]["sliding_attention"], "rope_parameters.sliding_attention.",
                             json::object(), 10000.0);
  const double theta = real_field_or(c, "rope_local_base_freq", 10000.0, 0.0, kHuge, true);
  json params = {{"rope_type", "default"}, {"rope_theta", theta}};
  return parse_rope_params(params, "", json::object(), 10000.0);
}

RopeConfig parse_rope_params(const json& params, const std::string& prefix, const json& c, double default_theta) {
  RopeConfig r;
  // A theta of 0 or below makes every frequency infinite or NaN.
  r.theta = real_field_or(params, "rope_theta", real_field_or(c, "rope_theta", default_theta, 0.0, kHuge, true),
                          0.0, kHuge, true, prefix);
  r.type = optional_field<std::string>(params, "rope_type", optional_field<std::string>(params, "type", "default"));
  r.partial_rotary_factor = real_field_or(params, "partial_rotary_factor",
                                          real_field_or(c, "partial_rotary_factor", 1.0, 0.0, 1.0), 0.0, 1.0,
                                          false, prefix);
  r.factor = optional_real(params, "factor", 0.0, kHuge, true, prefix);
  r.low_freq_factor = real_field_or(params, "low_freq_factor", 1.0, 0.0, kHuge, true, prefix);
  r.high_freq_factor = real_field_or(params, "high_freq_factor", 4.0, 0.0, kHuge, true, prefix);
  if (has(params, "original_max_position_embeddings"))
    r.original_max_position_embeddings =
        as_int(params["original_max_position_embeddings"], prefix + "original_max_position_embeddings", 1,
               lim::kMaxPositions);
  r.attention_factor = optional_real(params, "attention_factor", 0.0, kHuge, true, prefix);
  // yarn divides by log(max_pos / (beta * 2 pi)): beta must be positive.
  r.beta_fast = real_field_or(params, "beta_fast", 32.0, 0.0, kHuge, true, prefix);
  r.beta_slow = real_field_or(params, "beta_slow", 1.0, 0.0, kHuge, true, prefix);
  r.mscale = optional_real(params, "mscale", -kHuge, kHuge, false, prefix);
  r.mscale_all_dim = optional_real(params, "mscale_all_dim", -kHuge, kHuge, false, prefix);
  r.truncate = optional_field<bool>(params, "truncate", true);
  if (r.type == "mrope") r.type = "default";  // text-only use of multimodal rope
  check(r.type == "default" || r.type == "linear" || r.type == "llama3" || r.type == "yarn" ||
            r.type == "proportional",
        "config.json: unsupported rope type \"", r.type, "\" (supported: default, linear, llama3, yarn, proportional)");
  if (r.type != "default" && r.type != "proportional")
    check(r.factor.has_value() || r.type == "yarn", "config.json: rope type ", r.type, " needs a factor");
  if (r.type == "llama3")
    check(r.high_freq_factor > r.low_freq_factor, "config.json: rope llama3 needs high_freq_factor (",
          r.high_freq_factor, ") above low_freq_factor (", r.low_freq_factor, ")");
  if (r.type == "yarn") check(r.theta > 1.0, "config.json: rope yarn needs rope_theta above 1, got ", r.theta);
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
    const int64_t global_head_dim = int_field_or(c, "global_head_dim", 512, 2, lim::kMaxHeadDim);
    check(global_head_dim % 2 == 0, "config.json: field \"global_head_dim\" = ", global_head_dim, " must be even");
    const int64_t global_kv_heads =
        m.attention_k_eq_v ? int_field_or(c, "num_global_key_value_heads", m.num_kv_heads, 1, m.num_heads)
                           : m.num_kv_heads;
    check(m.num_heads % global_kv_heads == 0, "config.json: num_attention_heads (", m.num_heads,
          ") is not a multiple of num_global_key_value_heads (", global_kv_heads, ")");
    for (int64_t i = 0; i < m.num_layers; ++i)
      if (m.layer_types[size_t(i)] == LayerKind::full_attention) {
        m.layer_head_dim[size_t(i)] = global_head_dim;
        m.layer_kv_heads[size_t(i)] = global_kv_heads;
      }
  }
  if (c.contains("per_layer_config") && c["per_layer_config"].is_object()) {
    for (const auto& [key, value] : c["per_layer_config"].items()) {
      // Decimal digits only (stoll would also take " 5", "+5" and "0x5").
      int64_t layer = key.empty() || key.size() > 9 ? -1 : 0;
      for (char ch : key) layer = layer >= 0 && ch >= '0' && ch <= '9' ? layer * 10 + (ch - '0') : -1;
      check(layer >= 0 && layer < m.num_layers, "config.json: per_layer_config key \"", key,
            "\" is not a layer index below ", m.num_layers);
      check(value.is_object(), "config.json: per_layer_config[\"", key, "\"] must be an object");
      m.layer_head_dim[size_t(layer)] = int_field_or(value, "head_dim", m.head_dim, 2, lim::kMaxHeadDim);
      m.layer_kv_heads[size_t(layer)] = int_field_or(value, "num_key_value_heads", m.num_kv_heads, 1, m.num_heads);
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
  m.quantization = parse_quantization_config(root);
  // Every size is bounded here, before any vector or tensor is sized by it.
  m.vocab_size = int_field(c, "vocab_size", 1, lim::kMaxVocab);
  m.hidden_size = int_field(c, "hidden_size", 1, lim::kMaxHidden);
  m.intermediate_size = int_field(c, "intermediate_size", 1, lim::kMaxIntermediate);
  m.num_layers = int_field(c, "num_hidden_layers", 1, lim::kMaxLayers);
  m.num_heads = int_field(c, "num_attention_heads", 1, lim::kMaxHeads);
  m.num_kv_heads = int_field_or(c, "num_key_value_heads", m.num_heads, 1, m.num_heads);
  check(m.num_heads % m.num_kv_heads == 0, "config.json: num_attention_heads (", m.num_heads,
        ") is not a multiple of num_key_value_heads (", m.num_kv_heads, ")");
  m.head_dim = int_field_or(c, "head_dim", m.hidden_size / m.num_heads, 0, lim::kMaxHeadDim);
  check(m.head_dim > 0 && m.head_dim % 2 == 0, "config.json: head_dim must be positive and even, got ", m.head_dim);
  m.rms_norm_eps = real_field_or(c, "rms_norm_eps", 1e-6, 0.0, 1.0);
  m.max_position_embeddings = int_field_or(c, "max_position_embeddings", 4096, 1, lim::kMaxPositions);
  m.tie_word_embeddings = optional_field<bool>(c, "tie_word_embeddings", optional_field<bool>(root, "tie_word_embeddings", false));
  const bool gemma3 = m.model_type == "gemma3_text";
  const bool gemma4 = m.model_type == "gemma4_text";
  const bool qwen_next = m.model_type == "qwen3_next" || m.model_type == "qwen3_5_text";
  m.rope = parse_rope(c, gemma3 ? 1000000.0 : 10000.0);
  check(m.rope.type == "proportional" || m.rotary_dim() % 2 == 0, "config.json: rotary dim ", m.rotary_dim(), " must be even");
  check(m.rope.type == "proportional" || m.rotary_dim() >= 2, "config.json: rotary dim ", m.rotary_dim(),
        " (head_dim ", m.head_dim, " x partial_rotary_factor ", m.rope.partial_rotary_factor, ") must be at least 2");
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
    m.num_experts = int_field_or(c, "num_experts", int_field_or(c, "num_local_experts", 0, 0, lim::kMaxExperts), 0,
                                 lim::kMaxExperts);
    m.num_experts_per_tok = int_field_or(c, "num_experts_per_tok", 0, 0, lim::kMaxExperts);
    m.moe_intermediate_size = int_field_or(c, "moe_intermediate_size", 0, 0, lim::kMaxIntermediate);
    m.norm_topk_prob = optional_field<bool>(c, "norm_topk_prob", false);
    m.decoder_sparse_step = int_field_or(c, "decoder_sparse_step", 1, 1, lim::kMaxLayers);
    if (has(c, "mlp_only_layers")) {
      const json& layers = c["mlp_only_layers"];
      check(layers.is_array() && int64_t(layers.size()) <= m.num_layers,
            "config.json: field \"mlp_only_layers\" must be a list of at most ", m.num_layers,
            " layer indices, got ", json_excerpt(layers));
      for (const auto& l : layers) m.mlp_only_layers.push_back(as_int(l, "mlp_only_layers", 0, m.num_layers - 1));
    }
    if (m.num_experts > 0)
      check(m.num_experts_per_tok > 0 && m.num_experts_per_tok <= m.num_experts && m.moe_intermediate_size > 0,
            "config.json: num_experts_per_tok (", m.num_experts_per_tok, ") must be in [1, num_experts = ",
            m.num_experts, "] and moe_intermediate_size (", m.moe_intermediate_size, ") positive");
  }
  if (qwen_next) {
    m.attn_output_gate = true;
    m.shared_expert_intermediate_size = int_field_or(c, "shared_expert_intermediate_size", 0, 0, lim::kMaxIntermediate);
    ModelConfig::LinearAttention la;
    la.num_key_heads = int_field(c, "linear_num_key_heads", 1, lim::kMaxHeads);
    la.num_value_heads = int_field(c, "linear_num_value_heads", 1, lim::kMaxHeads);
    la.key_head_dim = int_field(c, "linear_key_head_dim", 1, lim::kMaxHeadDim);
    la.value_head_dim = int_field(c, "linear_value_head_dim", 1, lim::kMaxHeadDim);
    la.conv_kernel = int_field(c, "linear_conv_kernel_dim", 1, lim::kMaxConvKernel);
    check(la.num_value_heads % la.num_key_heads == 0, "config.json: linear_num_value_heads (", la.num_value_heads,
          ") is not a multiple of linear_num_key_heads (", la.num_key_heads, ")");
    m.linear_attention = la;
  }
  if (gemma4) {
    m.hidden_size_per_layer_input = int_field_or(c, "hidden_size_per_layer_input", 0, 0, lim::kMaxHidden);
    m.vocab_size_per_layer_input = int_field_or(c, "vocab_size_per_layer_input", m.vocab_size, 1, lim::kMaxVocab);
    m.attention_k_eq_v = optional_field<bool>(c, "attention_k_eq_v", false);
    m.num_kv_shared_layers = int_field_or(c, "num_kv_shared_layers", 0, 0, m.num_layers - 1);
    m.use_double_wide_mlp = optional_field<bool>(c, "use_double_wide_mlp", false);
    m.enable_moe_block = optional_field<bool>(c, "enable_moe_block", false);
    if (m.enable_moe_block) {
      m.num_experts = int_field(c, "num_experts", 1, lim::kMaxExperts);
      m.num_experts_per_tok = int_field(c, "top_k_experts", 1, m.num_experts);
      m.moe_intermediate_size = int_field(c, "moe_intermediate_size", 1, lim::kMaxIntermediate);
      m.decoder_sparse_step = 1;
    }
  }
  if (gemma3 || gemma4) {
    m.local_rope = parse_local_rope(c);
    // Gemma 4 scales attention by 1 (its q/k norms fix the magnitude).
    m.query_pre_attn_scalar = real_field_or(c, "query_pre_attn_scalar", gemma4 ? 1.0 : 256.0, 0.0, kHuge, true);
    // Soft-capping divides by the cap: positive or absent (null).
    m.attn_logit_softcapping = optional_real(c, "attn_logit_softcapping", 0.0, kHuge, true);
    m.final_logit_softcapping = optional_real(c, "final_logit_softcapping", 0.0, kHuge, true);
    m.hidden_activation = optional_field<std::string>(c, "hidden_activation", "gelu_pytorch_tanh");
  } else {
    m.hidden_activation = optional_field<std::string>(c, "hidden_act", "silu");
  }

  if (has(c, "sliding_window")) m.sliding_window = int_field(c, "sliding_window", 0, lim::kMaxPositions);
  if (has(c, "layer_types")) {
    const json& types = c["layer_types"];
    check(types.is_array(), "config.json: field \"layer_types\" must be a list, got ", json_excerpt(types));
    check(int64_t(types.size()) == m.num_layers, "config.json: layer_types has ", types.size(), " entries for ",
          m.num_layers, " layers");
    for (auto& t : types) {
      check(t.is_string(), "config.json: layer_types entries must be strings, got ", json_excerpt(t));
      m.layer_types.push_back(parse_layer_kind(t.get<std::string>()));
    }
  } else {
    // Older configs: Mistral windows every layer; Qwen2/3 window layers from
    // max_window_layers on when use_sliding_window is set (Qwen3-MoE: every
    // layer); Gemma 3 makes every sliding_window_pattern-th layer global.
    const bool qwen = m.model_type == "qwen2" || m.model_type == "qwen3" || m.model_type == "qwen3_moe";
    const bool use_sliding = qwen ? optional_field<bool>(c, "use_sliding_window", false) : m.sliding_window.has_value();
    const int64_t first_sliding =
        qwen && m.model_type != "qwen3_moe" ? int_field_or(c, "max_window_layers", 0, 0, lim::kMaxPositions) : 0;
    const int64_t pattern = int_field_or(c, "sliding_window_pattern",
                                         int_field_or(c, "_sliding_window_pattern", 6, 0, lim::kMaxLayers), 0,
                                         lim::kMaxLayers);
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

  if (c.contains("eos_token_id")) m.eos_token_ids = token_id_list(c["eos_token_id"], "eos_token_id");
  else if (root.contains("eos_token_id")) m.eos_token_ids = token_id_list(root["eos_token_id"], "eos_token_id");
  if (has(c, "bos_token_id")) m.bos_token_id = int_field(c, "bos_token_id", 0, lim::kMaxTokenId);
  m.weights_dtype = optional_field<std::string>(c, "dtype", optional_field<std::string>(c, "torch_dtype", ""));
  return m;
}

bool ModelConfig::is_sparse_moe_layer(int64_t layer) const {
  if (num_experts <= 0) return false;
  for (int64_t l : mlp_only_layers)
    if (l == layer) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

ModelConfig parse_model_config_text(std::string_view json_text) {
  return parse_model_config(parse_json_bounded(json_text, "config.json"));
}

ModelConfig load_model_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  check(fs::is_directory(model_dir, ec), "model folder not found: ", model_dir);
  const fs::path path = fs::path(model_dir) / "config.json";
  return parse_model_config(parse_json_bounded(read_file_capped(path), path.string()));
}

}  // namespace fathom
