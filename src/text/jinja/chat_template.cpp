#include "text/jinja/chat_template.h"


#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/json_file.h"

namespace fathom {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  check(bool(f), "chat template: cannot open ", path.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

nlohmann::ordered_json read_json(const std::filesystem::path& path) {
  return parse_json_bounded<nlohmann::ordered_json>(read_file(path), "chat template: " + path.string());
}

// A chat_template entry: a string, or [{"name": ..., "template": ...}] where "default" is used.
std::string template_from_entry(const nlohmann::ordered_json& entry, const std::string& where) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_array()) {
    std::string names;
    for (const auto& t : entry) {
      check(t.is_object() && t.contains("name") && t.contains("template") && t["template"].is_string(),
            "chat template: ", where, ": each entry of the chat_template list needs 'name' and 'template'");
      if (t["name"] == "default") return t["template"].get<std::string>();
      names += (names.empty() ? "" : ", ") + t["name"].dump();
    }
    fail("chat template: ", where, " has several templates and none is named \"default\" (", names, ")");
  }
  fail("chat template: ", where, ": chat_template must be a string or a list of {name, template}");
}

const nlohmann::ordered_json* token_text(const nlohmann::ordered_json& v) {
  if (v.is_string()) return &v;
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return &v["content"];
  return nullptr;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// transformers 5 passes special_tokens_map: the named tokens, the entries of an
// extra_special_tokens dict, and other top-level "*_token" strings (model-specific tokens).
nlohmann::ordered_json special_tokens_from_config(const nlohmann::ordered_json& config) {
  static const char* kNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                 "pad_token", "cls_token", "mask_token"};
  auto tokens = nlohmann::ordered_json::object();
  for (const char* name : kNames)
    if (config.contains(name))
      if (const auto* t = token_text(config[name])) tokens[name] = *t;
  if (config.contains("extra_special_tokens") && config["extra_special_tokens"].is_object())
    for (const auto& [k, v] : config["extra_special_tokens"].items())
      if (const auto* t = token_text(v)) tokens[k] = *t;
  for (const auto& [k, v] : config.items())
    if (ends_with(k, "_token") && !tokens.contains(k))
      if (const auto* t = token_text(v)) tokens[k] = *t;
  return tokens;
}

}  // namespace

ChatTemplate ChatTemplate::from_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  check(fs::is_directory(root), "chat template: ", dir, " is not a directory");
  const fs::path config_path = root / "tokenizer_config.json";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (fs::exists(config_path)) config = read_json(config_path);
  check(config.is_object(), "chat template: ", config_path.string(), " is not a JSON object");

  std::string source;
  if (fs::exists(root / "chat_template.jinja")) {
    source = read_file(root / "chat_template.jinja");
  } else if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    source = template_from_entry(config["chat_template"], config_path.string());
  } else if (fs::exists(root / "chat_template.json")) {
    const auto j = read_json(root / "chat_template.json");
    check(j.is_object() && j.contains("chat_template"), "chat template: ", (root / "chat_template.json").string(),
          " has no \"chat_template\"");
    source = template_from_entry(j["chat_template"], (root / "chat_template.json").string());
  } else {
    fail("chat template: ", dir, " has no chat template (looked for chat_template.jinja, the chat_template of "
         "tokenizer_config.json, and chat_template.json)");
  }
  return ChatTemplate(std::move(source), special_tokens_from_config(config));
}

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : ChatTemplate(std::move(source), [&] {
        auto tokens = nlohmann::ordered_json::object();
        if (!bos_token.empty()) tokens["bos_token"] = bos_token;
        if (!eos_token.empty()) tokens["eos_token"] = eos_token;
        return tokens;
      }()) {}

ChatTemplate::ChatTemplate(std::string source, nlohmann::ordered_json special_tokens)
    : template_(std::move(source), "chat_template"), special_tokens_(std::move(special_tokens)) {
  check(special_tokens_.is_object(), "chat template: special tokens must be a JSON object");
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                                 const jinja::RenderOptions& options) const {
  check(messages.is_array(), "chat template: messages must be an array, got ", messages.type_name());
  check(tools.is_null() || tools.is_array(), "chat template: tools must be an array or null, got ", tools.type_name());
  check(extra_kwargs.is_null() || extra_kwargs.is_object(), "chat template: chat_template_kwargs must be an object");
  // transformers: render(messages=..., tools=..., documents=..., add_generation_prompt=...,
  //                      **{**special_tokens_map, **kwargs})
  // Converted straight to Values: copying the request's JSON first would cost a copy of the
  // whole prompt, and nlohmann copies recursively (a deep value would use deep native stack).
  jinja::Dict vars;
  try {
    vars.set(jinja::Value("messages"), jinja::Value::from_json(messages));
    vars.set(jinja::Value("tools"), jinja::Value::from_json(tools));
    vars.set(jinja::Value("documents"), jinja::Value::none());
    vars.set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
    for (const auto& [k, v] : special_tokens_.items()) vars.set(jinja::Value(k), jinja::Value::from_json(v));
    if (extra_kwargs.is_object()) {
      for (const auto& [k, v] : extra_kwargs.items()) {
        check(k != "messages" && k != "tools" && k != "documents" && k != "add_generation_prompt",
              "chat template: chat_template_kwargs may not set '", k, "' (it has its own request field)");
        vars.set(jinja::Value(k), jinja::Value::from_json(v));
      }
    }
  } catch (const jinja::EvalError& e) {
    throw fathom::Error(std::string("jinja: template variables: ") + e.what());
  }
  return template_.render(vars, options);
}

}  // namespace fathom
