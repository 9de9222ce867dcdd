#include "io/generation_config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/model_config.h"

namespace fathom {
namespace {

using nlohmann::json;

bool has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A JSON integer (not a float or bool) in [0, kMaxTokenId]: token ids and top_k.
int64_t small_int(const json& v, const std::string& source, const char* field) {
  constexpr int64_t hi = config_limits::kMaxTokenId;
  const bool ok = v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi)) &&
                  v.get<int64_t>() >= 0 && v.get<int64_t>() <= hi;
  check(ok, source, ": field \"", field, "\" must be an integer in [0, ", hi, "], got ", json_excerpt(v));
  return v.get<int64_t>();
}

double finite_in(const json& v, const std::string& source, const char* field, double lo, double hi) {
  check(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= lo && v.get<double>() <= hi, source,
        ": field \"", field, "\" must be a number in [", lo, ", ", hi, "], got ", json_excerpt(v));
  return v.get<double>();
}

}  // namespace

GenerationConfig parse_generation_config_text(std::string_view json_text, const std::string& source) {
  const json j = parse_json_bounded(json_text, source);
  check(j.is_object(), source, ": not a JSON object");
  GenerationConfig g;
  if (has(j, "eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_array()) {
      check(e.size() <= config_limits::kMaxTokenIdList, source, ": field \"eos_token_id\" lists ", e.size(),
            " ids (at most ", config_limits::kMaxTokenIdList, ")");
      for (const auto& x : e) g.eos_token_ids.push_back(small_int(x, source, "eos_token_id"));
    } else {
      g.eos_token_ids.push_back(small_int(e, source, "eos_token_id"));
    }
  }
  if (has(j, "bos_token_id")) g.bos_token_id = small_int(j["bos_token_id"], source, "bos_token_id");
  if (has(j, "temperature")) g.temperature = finite_in(j["temperature"], source, "temperature", 0.0, 1e6);
  if (has(j, "top_p")) g.top_p = finite_in(j["top_p"], source, "top_p", 0.0, 1.0);
  if (has(j, "top_k")) g.top_k = small_int(j["top_k"], source, "top_k");
  return g;
}

GenerationConfig load_generation_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return {};
  return parse_generation_config_text(read_file_capped(path), path.string());
}

}  // namespace fathom
