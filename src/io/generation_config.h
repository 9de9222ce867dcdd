#pragma once
// generation_config.json: the model's stop ids and sampling defaults.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
};

// A missing file is an empty config; a malformed one is an error.
GenerationConfig load_generation_config(const std::string& model_dir);
// generation_config.json's text (the entry point for fuzzing); `source` names it in errors.
GenerationConfig parse_generation_config_text(std::string_view json_text,
                                              const std::string& source = "generation_config.json");

}  // namespace fathom
