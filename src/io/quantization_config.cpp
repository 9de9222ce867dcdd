#include "io/quantization_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fathom {
namespace {

using json = nlohmann::json;

int checked_int(const json& block, const char* key, const std::string& where) {
  check(block.contains(key), where, ": \"", key, "\" is missing");
  const json& v = block[key];
  check(v.is_number_integer(), where, ".", key, ": expected an integer, got ", v.dump());
  return v.get<int>();
}

QuantParams parse_params(const json& block, const std::string& where) {
  if (block.contains("mode")) {
    const json& mode = block["mode"];
    check(mode.is_string() && mode.get<std::string>() == "affine", where,
          ".mode: only MLX's \"affine\" quantization is supported, got ", mode.dump());
  }
  QuantParams p{checked_int(block, "bits", where), checked_int(block, "group_size", where)};
  check(p.bits == 2 || p.bits == 3 || p.bits == 4 || p.bits == 5 || p.bits == 6 || p.bits == 8, where,
        ".bits: ", p.bits, " is not supported (2, 3, 4, 5, 6 or 8)");
  check(p.group_size == 32 || p.group_size == 64 || p.group_size == 128, where, ".group_size: ", p.group_size,
        " is not supported (32, 64 or 128)");
  return p;
}

}  // namespace

std::optional<QuantParams> QuantizationConfig::for_module(const std::string& module) const {
  const auto it = modules.find(module);
  return it == modules.end() ? std::optional<QuantParams>(defaults) : it->second;
}

json QuantizationConfig::to_json() const {
  json out = {{"group_size", defaults.group_size}, {"bits", defaults.bits}, {"mode", "affine"}};
  for (const auto& [module, params] : modules)
    out[module] = params ? json{{"group_size", params->group_size}, {"bits", params->bits}} : json(false);
  return out;
}

std::optional<QuantizationConfig> parse_quantization_config(const json& root) {
  if (!root.is_object()) return std::nullopt;
  const char* key = root.contains("quantization") ? "quantization" : "quantization_config";
  if (!root.contains(key)) return std::nullopt;
  const json& block = root[key];
  const std::string where = std::string("config.json ") + key;
  check(block.is_object(), where, ": expected an object, got ", block.dump());
  if (block.contains("quant_method")) {
    fail(where, ".quant_method: ", block["quant_method"].dump(),
          " is not supported (fathom reads MLX's affine quantization: bits, group_size and .scales/.biases)");
  }
  QuantizationConfig q;
  q.defaults = parse_params(block, where);
  for (const auto& [name, value] : block.items()) {
    if (value.is_object()) q.modules[name] = parse_params(value, where + "[\"" + name + "\"]");
    else if (value.is_boolean()) q.modules[name] = value.get<bool>() ? std::optional<QuantParams>(q.defaults) : std::nullopt;
  }
  return q;
}

}  // namespace fathom
