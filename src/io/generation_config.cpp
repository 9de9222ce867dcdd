#include "io/generation_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fathom {

GenerationConfig load_generation_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  GenerationConfig g;
  const fs::path path = fs::path(model_dir) / "generation_config.json";
  if (!fs::exists(path)) return g;
  std::ifstream in(path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    fail(path.string(), ": invalid JSON: ", e.what());
  }
  check(j.is_object(), path.string(), ": not a JSON object");
  if (j.contains("eos_token_id")) {
    const auto& e = j["eos_token_id"];
    if (e.is_number_integer()) g.eos_token_ids.push_back(e.get<int64_t>());
    if (e.is_array())
      for (auto& x : e)
        if (x.is_number_integer()) g.eos_token_ids.push_back(x.get<int64_t>());
  }
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) g.bos_token_id = j["bos_token_id"].get<int64_t>();
  if (j.contains("temperature") && j["temperature"].is_number()) g.temperature = j["temperature"].get<double>();
  if (j.contains("top_p") && j["top_p"].is_number()) g.top_p = j["top_p"].get<double>();
  if (j.contains("top_k") && j["top_k"].is_number_integer()) g.top_k = j["top_k"].get<int64_t>();
  return g;
}

}  // namespace fathom
