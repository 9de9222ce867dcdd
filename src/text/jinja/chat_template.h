#pragma once
// A model's chat template, rendered with the variables transformers'
// apply_chat_template passes: messages, tools (none when absent), documents
// (none), add_generation_prompt, the tokenizer's special tokens (bos_token,
// eos_token, ...) and any extra keyword arguments (enable_thinking, ...).
//
// JSON arguments are nlohmann::ordered_json: key order reaches the output
// through tojson (tool schemas), so it must be the order of the request.
#include <concepts>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja/template.h"

namespace fathom {

class ChatTemplate {
 public:
  // Reads the template as transformers does: DIR/chat_template.jinja if present
  // (it overrides the config), else tokenizer_config.json's "chat_template"
  // (a string, or a list of {name, template} of which "default" is used), else
  // DIR/chat_template.json. Special tokens come from tokenizer_config.json as
  // transformers 5 exposes them: bos/eos/unk/sep/pad/cls/mask, the entries of an
  // extra_special_tokens dict and other "*_token" strings (strings or {"content": ...});
  // null ones are left undefined. (Defaults a tokenizer class adds on its own, such as
  // Gemma's "<mask>", are not known here.)
  static ChatTemplate from_model_dir(const std::string& dir);

  // Empty bos/eos tokens are left undefined in the template (as transformers does for unset tokens).
  explicit ChatTemplate(std::string source, std::string bos_token = "", std::string eos_token = "");
  // special_tokens: {"bos_token": "<s>", "eos_token": "</s>", ...}
  ChatTemplate(std::string source, nlohmann::ordered_json special_tokens);

  // messages: array; tools: array or null; extra_kwargs: object (chat_template_kwargs).
  // Throws jinja::TemplateError (raise_exception, unsupported constructs, type errors) or fathom::Error.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                     const jinja::RenderOptions& options = {}) const;

  // nlohmann::json sorts object keys and the order reaches the prompt (tojson of tool
  // schemas), so passing it is a compile error: parse requests as nlohmann::ordered_json.
  template <typename Messages, typename Tools>
    requires(std::same_as<Messages, nlohmann::json> || std::same_as<Tools, nlohmann::json>)
  std::string render(const Messages&, const Tools&, bool, const nlohmann::ordered_json&,
                     const jinja::RenderOptions& = {}) const = delete;

  const std::string& source() const { return template_.source(); }
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

 private:
  jinja::Template template_;
  nlohmann::ordered_json special_tokens_;
};

}  // namespace fathom
