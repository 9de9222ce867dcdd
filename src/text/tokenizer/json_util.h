#pragma once
// Reading tokenizer.json fields with errors that name the construct and the field.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace fathom::tok {

using nlohmann::json;

inline const json& require_field(const json& j, const char* key, std::string_view what) {
  check(j.is_object(), what, ": expected a JSON object, got ", std::string(j.type_name()));
  const auto it = j.find(key);
  check(it != j.end(), what, ": missing field \"", key, "\"");
  return *it;
}

inline std::string require_string(const json& j, const char* key, std::string_view what) {
  const json& v = require_field(j, key, what);
  check(v.is_string(), what, ": field \"", key, "\" must be a string, got ", std::string(v.type_name()));
  return v.get<std::string>();
}

inline bool bool_or(const json& j, const char* key, bool fallback, std::string_view what) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  check(it->is_boolean(), what, ": field \"", key, "\" must be a boolean, got ", std::string(it->type_name()));
  return it->get<bool>();
}

inline std::optional<std::string> optional_string(const json& j, const char* key, std::string_view what) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  check(it->is_string(), what, ": field \"", key, "\" must be a string, got ", std::string(it->type_name()));
  return it->get<std::string>();
}

inline int64_t int_or(const json& j, const char* key, int64_t fallback, std::string_view what) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  check(it->is_number_integer(), what, ": field \"", key, "\" must be an integer, got ", std::string(it->type_name()));
  return it->get<int64_t>();
}

// The "type" of a pipeline component, e.g. "NFC" in {"type": "NFC"}.
inline std::string component_type(const json& j, std::string_view what) { return require_string(j, "type", what); }

}  // namespace fathom::tok
