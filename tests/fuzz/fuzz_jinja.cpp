// A chat template and its variables, both fuzzed, rendered the way the server does
// (ChatTemplate) under small limits. Input: <template source> \0 <variables JSON>,
// the variables as a request gives them: {"messages": [...], "tools": [...],
// "add_generation_prompt": bool, other keys → chat_template_kwargs}. Without a valid
// JSON object after the NUL the variables are a short default conversation.
// Parsing and rendering throw jinja::TemplateError / fathom::Error, nothing else.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/jinja/chat_template.h"
#include "text/jinja/diagnostics.h"

namespace {

using ojson = nlohmann::ordered_json;

const ojson& default_variables() {
  static const ojson v = ojson::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                 {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}],
    "add_generation_prompt": true})");
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::string source(input.substr(0, nul));
  ojson vars = nul == std::string_view::npos ? ojson() : ojson::parse(input.substr(nul + 1), nullptr, false);
  if (!vars.is_object()) vars = default_variables();

  ojson messages = vars.contains("messages") ? vars["messages"] : default_variables()["messages"];
  ojson tools = vars.contains("tools") ? vars["tools"] : ojson();
  const auto agp = vars.find("add_generation_prompt");
  const bool add_generation_prompt = agp == vars.end() || *agp == true;
  ojson kwargs = ojson::object();
  for (const auto& [key, value] : vars.items())
    if (key != "messages" && key != "tools" && key != "add_generation_prompt") kwargs[key] = value;

  fathom::jinja::RenderOptions options;
  options.max_steps = 200'000;
  options.max_output_bytes = size_t(1) << 20;
  options.max_value_bytes = size_t(1) << 20;
  options.clock = [] { return std::time_t(1721997296); };
  try {
    const fathom::ChatTemplate tmpl(std::move(source),
                                    ojson{{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"pad_token", "<pad>"}});
    const std::string out = tmpl.render(messages, tools, add_generation_prompt, kwargs, options);
    if (out.size() > options.max_output_bytes) __builtin_trap();
  } catch (const fathom::Error&) {  // jinja::TemplateError is one
  }
  return 0;
}
