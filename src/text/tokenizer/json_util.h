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

// Token ids read from tokenizer.json are below this: a hostile file cannot make the
// tables indexed by id (or an embedding lookup downstream) huge, nor overflow int32.
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

inline bool is_token_id(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(kMaxTokenId);
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId;
}

[[noreturn]] inline void fail_token_id(const json& v, std::string_view what) {
  fail(what, " must be a token id, an integer in [0, ", kMaxTokenId, "], got ", v.dump());
}

// A token id: an integer in [0, kMaxTokenId]; `what` names the field.
inline int32_t require_token_id(const json& v, std::string_view what) {
  if (!is_token_id(v)) fail_token_id(v, what);
  return int32_t(v.get<int64_t>());
}

// The tables indexed by id span max_id + 1 entries: refuse id spaces far bigger than the
// tokens that fill them (a handful of tokens with ids near kMaxTokenId).
inline void check_id_space(int64_t max_id, size_t tokens, std::string_view what) {
  const int64_t allowed = int64_t(tokens) * 4 + (int64_t(1) << 20);
  check(max_id < allowed, what, ": the largest token id ", max_id, " is far beyond the ", tokens,
        " tokens defined (ids may reach at most 4 x tokens + 1048576)");
}

// The "type" of a pipeline component, e.g. "NFC" in {"type": "NFC"}.
inline std::string component_type(const json& j, std::string_view what) { return require_string(j, "type", what); }

}  // namespace fathom::tok
