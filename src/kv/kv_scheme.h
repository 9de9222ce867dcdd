#pragma once
// How attention K/V are stored, as a value. A scheme names a codec for every
// attention layer, may delay quantization until the cache holds
// `quantized_kv_start` tokens, and knows its exact bytes and its cache key.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "backend/kv_view.h"
#include "kv/kv_layout.h"

namespace fathom {

// The storage of one attention layer.
struct LayerCodec {
  enum class Kind { plain, affine, turbo };
  Kind kind = Kind::plain;
  int bits = 16;        // affine: bits per value
  int group_size = 64;  // affine: values per scale/bias pair, along head_dim
  int k_bits = 0;       // turbo
  int v_bits = 0;       // turbo

  // "bf16", "kv4", "kv4-g32", "turbo-k3v4".
  std::string label() const;
  // How a layer with this codec lays its rows out in blocks of `block_bytes`
  // (plain: rows of plain_dtype).
  KvFormat format(int64_t kv_heads, int64_t head_dim, DType plain_dtype, int64_t block_bytes) const;
  bool operator==(const LayerCodec&) const = default;
};

// One entry of kv_config.json.
struct KvConfigEntry {
  int64_t layer_idx = 0;
  int bits = 4;
  int group_size = 64;
};

class KvScheme {
 public:
  enum class Kind { bf16, affine_uniform, affine_config, turbo };

  static KvScheme bf16();
  // Default start 5000 (the first 5000 tokens stay bf16).
  static KvScheme affine_uniform(int bits, int group_size = 64, std::optional<int64_t> start = {});
  static KvScheme affine_config(std::vector<KvConfigEntry> entries, std::optional<int64_t> start = {});
  static KvScheme turbo(int k_bits, int v_bits, std::optional<int64_t> start = {});

  // From the CLI flags: --kv-quant off|2|3|4|6|8|config, --kv-group-size,
  // --quantized-kv-start, --turbo-kv K,V. Every invalid combination is an error.
  static KvScheme from_flags(const std::string& kv_quant, std::optional<int> group_size,
                             const std::string& quantized_kv_start, const std::string& turbo_kv,
                             const std::string& model_dir);
  static std::vector<KvConfigEntry> load_kv_config(const std::string& model_dir);
  // The inverse of cache_key(): "bf16", "kv4-g32-start100", "turbo-k3v4",
  // "config-start10" (config reads kv_config.json from model_dir).
  static KvScheme from_cache_key(const std::string& key, const std::string& model_dir = "");

  Kind kind() const { return kind_; }
  int64_t quantized_kv_start() const { return start_; }
  // Stable text naming everything that changes stored bytes.
  std::string cache_key() const;
  // The codec a layer gets once quantized; recurrent layers get none (plain
  // is returned and they own no KV). Throws for entries naming bad layers.
  LayerCodec codec_for_layer(const ModelConfig& config, int64_t layer) const;
  // Checks the scheme against a model (kv_config layers in range, not recurrent;
  // head_dim divisible by the group; turbo needs a power-of-two head_dim).
  void validate_for(const ModelConfig& config) const;
  // {"cache_key", "mode", "codecs": {label: layers}, "attention_layers": {"global", "sliding", "kv_shared"}, "recurrent_layers", ...}
  nlohmann::json describe(const ModelConfig& config) const;
  // Bytes of the state of one sequence holding `tokens` tokens: each
  // attention layer's blocks (kv_blocks_at) of the plain format below the
  // start and of its codec from then on, KV-shared layers own nothing, and
  // each linear-attention layer adds its fixed f32 state. Exact, except that
  // a sliding layer converted at a delayed start may hold a block less.
  int64_t bytes_at(const ModelConfig& config, int64_t tokens, int64_t plain_bytes = 2,
                   int64_t sliding_step = kSlidingStepTokens) const;

 private:
  Kind kind_ = Kind::bf16;
  int bits_ = 16, group_size_ = 64, k_bits_ = 0, v_bits_ = 0;
  int64_t start_ = 0;
  std::vector<KvConfigEntry> entries_;
};

}  // namespace fathom
