#pragma once
// Parsing JSON that comes from a model folder (config.json, the shard index,
// safetensors headers): the size and the nesting depth are bounded before
// nlohmann sees the text. nlohmann parses iteratively, but copying, dump()
// and comparing a value recurse once per level, so a file of 100000 '[' would
// overflow the stack later, far from the parse.
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace fathom {

inline constexpr int kMaxJsonDepth = 64;                      // real configs nest 4 deep
inline constexpr size_t kMaxJsonFileBytes = size_t(64) << 20;  // config.json, index, generation_config

// Throws unless every array / object in `text` (a JSON document, valid or not)
// nests at most max_depth deep. Brackets inside strings do not count.
inline void check_json_depth(std::string_view text, int max_depth, const std::string& what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') ++i;  // the escaped character cannot end the string
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      check(++depth <= max_depth, what, ": JSON nests deeper than ", max_depth, " levels (at byte ", i, ")");
    } else if (ch == ']' || ch == '}') {
      check(--depth >= 0, what, ": invalid JSON: unmatched '", std::string(1, ch), "' at byte ", i);
    }
  }
}

// Parses text after check_json_depth; nlohmann's errors become fathom::Error naming `what`.
// Json: nlohmann::json, or nlohmann::ordered_json where key order must survive.
template <typename Json = nlohmann::json>
Json parse_json_bounded(std::string_view text, const std::string& what, int max_depth = kMaxJsonDepth) {
  check_json_depth(text, max_depth, what);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    fail(what, ": invalid JSON: ", e.what());
  }
}

// The whole file, refusing anything that is not a regular file of at most max_bytes.
inline std::string read_file_capped(const std::filesystem::path& path, size_t max_bytes = kMaxJsonFileBytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  check(fs::is_regular_file(path, ec), path.string(), ": not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  check(!ec, "cannot read ", path.string(), ": ", ec.message());
  check(size <= max_bytes, path.string(), ": ", size, " bytes is more than the ", max_bytes, " allowed");
  std::ifstream in(path, std::ios::binary);
  check(bool(in), "cannot read ", path.string());
  std::string text;
  text.reserve(size_t(size));
  text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  check(text.size() <= max_bytes, path.string(), ": grew past ", max_bytes, " bytes while being read");
  return text;
}

// A short, always-printable rendering of a JSON value for error messages.
inline std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 80) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace fathom
