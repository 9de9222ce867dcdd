#include "text/tokenizer/tokenizer_config.h"

#include <algorithm>
#include <map>

#include "text/tokenizer/json_util.h"

namespace fathom::tok {

namespace {

constexpr std::string_view kWhat = "tokenizer_config.json";

// A token is written as "text" or as an AddedToken object {"content": "text", ...}.
std::optional<std::string> token_text(const json& v, std::string_view key) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  fail(kWhat, ": \"", key, "\" must be a string or {\"content\": ...}, got ", v.dump());
}

// transformers' class defaults for named tokens the config may leave out (those that
// change which ids are special). Keys present in the config, even as null, win.
const std::map<std::string, std::map<std::string, std::string>>& class_defaults() {
  static const std::map<std::string, std::map<std::string, std::string>> d = {
      {"GemmaTokenizer", {{"unk_token", "<unk>"}, {"bos_token", "<bos>"}, {"eos_token", "<eos>"},
                          {"pad_token", "<pad>"}, {"mask_token", "<mask>"}}},
      {"GemmaTokenizerFast", {{"unk_token", "<unk>"}, {"bos_token", "<bos>"}, {"eos_token", "<eos>"},
                              {"pad_token", "<pad>"}, {"mask_token", "<mask>"}}},
  };
  return d;
}

}  // namespace

TokenizerConfig parse_tokenizer_config(const json& j) {
  TokenizerConfig c;
  if (j.is_null()) return c;
  check(j.is_object(), kWhat, ": expected a JSON object");
  c.tokenizer_class = optional_string(j, "tokenizer_class", kWhat).value_or("");
  auto add_named = [&](const std::string& t) {
    if (std::find(c.named_special_tokens.begin(), c.named_special_tokens.end(), t) == c.named_special_tokens.end())
      c.named_special_tokens.push_back(t);
  };
  static const char* kNamed[] = {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"};
  const auto defaults = class_defaults().find(c.tokenizer_class);
  for (const char* key : kNamed) {
    std::optional<std::string> value;
    if (j.contains(key)) {
      value = token_text(j[key], key);
    } else if (defaults != class_defaults().end()) {
      if (auto it = defaults->second.find(key); it != defaults->second.end()) value = it->second;
    }
    if (!value) continue;
    if (std::string_view(key) == "bos_token") c.bos_token = value;
    if (std::string_view(key) == "eos_token") c.eos_token = value;
    add_named(*value);
  }
  for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    const json& list = j[key];
    check(list.is_array() || list.is_object(), kWhat, ": \"", key, "\" must be a list or an object");
    for (const auto& item : list)
      if (auto t = token_text(item, key)) add_named(*t);
  }
  if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) c.add_bos_token = j["add_bos_token"].get<bool>();
  if (j.contains("add_eos_token") && j["add_eos_token"].is_boolean()) c.add_eos_token = j["add_eos_token"].get<bool>();
  c.clean_up_tokenization_spaces = bool_or(j, "clean_up_tokenization_spaces", false, kWhat);
  return c;
}

}  // namespace fathom::tok
