#pragma once
// config.json's "quantization" block of an MLX-format folder: the default code
// width and group size, and per-module entries that override them (a module
// path such as "model.layers.0.mlp.down_proj" mapped to its own bits and group
// size, or to false for a module kept in full precision). Which modules are
// quantized is decided by the weights (a module is quantized when its .scales
// tensor exists); this says how.
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace fathom {

struct QuantParams {
  int bits = 0;
  int group_size = 0;
  bool operator==(const QuantParams&) const = default;
};

struct QuantizationConfig {
  QuantParams defaults;
  // Per-module entries: nullopt means the module stays in full precision.
  std::map<std::string, std::optional<QuantParams>> modules;

  // The params a module is quantized with (its own entry, else the defaults);
  // nullopt when its entry says it is not quantized.
  std::optional<QuantParams> for_module(const std::string& module) const;
  // The block as config.json writes it (mlx-lm's shape, "mode": "affine").
  nlohmann::json to_json() const;
};

// From config.json's root: "quantization", else "quantization_config" when it
// is MLX's shape; nullopt when neither is present. Throws fathom::Error naming
// the key for a method other than MLX's affine one (fp8, gptq, mxfp4, ...),
// for bits outside {2, 3, 4, 5, 6, 8} or group sizes outside {32, 64, 128}.
std::optional<QuantizationConfig> parse_quantization_config(const nlohmann::json& root);

}  // namespace fathom
