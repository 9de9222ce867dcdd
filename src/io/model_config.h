#pragma once
// config.json as a native struct. Everything the forward pass and the memory
// contract need is read here once; model code never sees JSON.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/quantization_config.h"

namespace fathom {

enum class LayerKind { full_attention, sliding_attention, linear_attention };
const char* layer_kind_name(LayerKind kind);

struct RopeConfig {
  // default | linear | llama3 | yarn | proportional (Gemma 4: rotate pairs
  // across the whole head_dim, the last (1 - partial_rotary_factor) of the
  // frequencies zero)
  std::string type = "default";
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;
  std::optional<double> factor;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  std::optional<int64_t> original_max_position_embeddings;
  std::optional<double> attention_factor;  // yarn
  double beta_fast = 32.0;                 // yarn
  double beta_slow = 1.0;                  // yarn
  std::optional<double> mscale;            // yarn
  std::optional<double> mscale_all_dim;    // yarn
  bool truncate = true;                    // yarn
};

struct ModelConfig {
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;     // q/k/v projections carry a bias
  bool o_bias = false;       // the output projection carries a bias
  bool mlp_bias = false;
  bool qk_norm = false;      // RMSNorm over head_dim on q and k before RoPE (Qwen3)
  std::optional<int64_t> sliding_window;
  std::vector<LayerKind> layer_types;  // one per layer
  RopeConfig rope;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  std::string weights_dtype;  // config's torch_dtype / dtype, informative
  // MLX affine quantization of the weights (config.json's "quantization"), if any.
  std::optional<QuantizationConfig> quantization;

  // Sparse MoE (Qwen3-MoE): a layer is sparse when it is not in mlp_only_layers
  // and (layer + 1) % decoder_sparse_step == 0; other layers use the dense MLP.
  int64_t num_experts = 0;  // num_experts / num_local_experts; 0 = dense model
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;  // renormalize the top-k routing weights to sum to 1
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;

  // Gemma 3: sliding layers have their own RoPE; attention scale is
  // query_pre_attn_scalar^-0.5; optional tanh soft-capping of scores / logits.
  std::optional<RopeConfig> local_rope;  // RoPE of sliding_attention layers when it differs
  std::optional<double> query_pre_attn_scalar;
  std::optional<double> attn_logit_softcapping;
  std::optional<double> final_logit_softcapping;
  std::string hidden_activation = "silu";

  // Per-layer attention shapes (every model): Gemma 4's global layers have
  // their own head_dim and kv-head count (per_layer_config). kv_source_layer[i]
  // is the layer whose cache layer i reads: i itself, or for Gemma 4's
  // num_kv_shared_layers last layers the last earlier layer of the same type,
  // in which case layer i owns no cache.
  // (Empty vectors, in hand-built configs, mean the uniform values.)
  std::vector<int64_t> layer_head_dim, layer_kv_heads, kv_source_layer;
  int64_t head_dim_of(int64_t layer) const { return layer_head_dim.empty() ? head_dim : layer_head_dim[size_t(layer)]; }
  int64_t kv_heads_of(int64_t layer) const { return layer_kv_heads.empty() ? num_kv_heads : layer_kv_heads[size_t(layer)]; }
  int64_t kv_source_of(int64_t layer) const { return kv_source_layer.empty() ? layer : kv_source_layer[size_t(layer)]; }
  // The attention window of a sliding_attention layer; none for the others.
  std::optional<int64_t> window_of(int64_t layer) const {
    if (layer_types[size_t(layer)] != LayerKind::sliding_attention) return std::nullopt;
    return sliding_window;
  }
  bool owns_kv(int64_t layer) const {
    return layer_types[size_t(layer)] != LayerKind::linear_attention && kv_source_of(layer) == layer;
  }

  // Gated DeltaNet (linear_attention layers of Qwen3-Next / Qwen3.5).
  struct LinearAttention {
    int64_t num_key_heads = 0, num_value_heads = 0, key_head_dim = 0, value_head_dim = 0, conv_kernel = 0;
    int64_t key_dim() const { return num_key_heads * key_head_dim; }
    int64_t value_dim() const { return num_value_heads * value_head_dim; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // q, k and v go through the conv
    // f32 state of one layer: the last conv_kernel - 1 inputs of the conv and
    // the [value_heads, key_head_dim, value_head_dim] recurrent matrix.
    int64_t state_bytes() const {
      return int64_t(sizeof(float)) *
             (conv_dim() * (conv_kernel - 1) + num_value_heads * key_head_dim * value_head_dim);
    }
  };
  std::optional<LinearAttention> linear_attention;
  // Qwen3-Next / Qwen3.5: q_proj also emits a per-head output gate (sigmoid).
  bool attn_output_gate = false;
  // Qwen3-Next MoE: a shared expert (with a sigmoid gate) beside the routed ones.
  int64_t shared_expert_intermediate_size = 0;

  // Gemma 4.
  int64_t hidden_size_per_layer_input = 0;  // per-layer inputs (PLE); 0 = off
  int64_t vocab_size_per_layer_input = 0;
  bool attention_k_eq_v = false;            // global layers: values are the keys' projection
  int64_t num_kv_shared_layers = 0;
  bool use_double_wide_mlp = false;         // KV-shared layers' MLP is twice as wide
  bool enable_moe_block = false;            // dense MLP plus a MoE block on every layer (top_k in num_experts_per_tok)

  bool is_sparse_moe_layer(int64_t layer) const;

  int64_t rotary_dim() const { return int64_t(double(head_dim) * rope.partial_rotary_factor); }
};

// Bounds on config.json values, checked before anything is sized by them
// (generous: several times the largest released model).
namespace config_limits {
inline constexpr int64_t kMaxVocab = int64_t(1) << 24;
inline constexpr int64_t kMaxHidden = int64_t(1) << 16;
inline constexpr int64_t kMaxIntermediate = int64_t(1) << 18;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxHeadDim = 4096;
inline constexpr int64_t kMaxPositions = int64_t(1) << 24;  // also sliding_window
inline constexpr int64_t kMaxExperts = 4096;
inline constexpr int64_t kMaxConvKernel = 256;
inline constexpr int64_t kMaxTokenId = (int64_t(1) << 31) - 1;  // token ids are int32
inline constexpr size_t kMaxTokenIdList = 1024;
}  // namespace config_limits

// Parses config.json. Architecture-specific defaults (Qwen2's q/k/v bias,
// Qwen3's qk-norm, sliding-window layer rules) are applied by model_type.
// Every field is type- and range-checked: a bad one throws fathom::Error
// naming the field and its value.
ModelConfig parse_model_config(const nlohmann::json& config);
// The same from config.json's text, its nesting depth bounded before parsing
// (the entry point for fuzzing).
ModelConfig parse_model_config_text(std::string_view json_text);
ModelConfig load_model_config(const std::string& model_dir);

}  // namespace fathom
