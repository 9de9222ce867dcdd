// fathom chat-template --model DIR --request FILE.json
// Prints the prompt the model's chat template renders for the request, byte
// for byte (no newline is added). The request holds "messages", optional
// "tools", "add_generation_prompt" (default true) and "chat_template_kwargs".
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/error.h"
#include "text/jinja/chat_template.h"

namespace fathom::cli {
namespace {

nlohmann::ordered_json read_request(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(bool(f), "chat-template: cannot open request file ", path);
  std::ostringstream s;
  s << f.rdbuf();
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(s.str());
  } catch (const nlohmann::json::exception& e) {
    fail("chat-template: ", path, " is not valid JSON: ", e.what());
  }
  check(request.is_object(), "chat-template: the request must be a JSON object");
  for (const auto& [key, value] : request.items()) {
    check(key == "messages" || key == "tools" || key == "add_generation_prompt" || key == "chat_template_kwargs",
          "chat-template: unknown request field \"", key,
          "\" (expected messages, tools, add_generation_prompt, chat_template_kwargs)");
  }
  check(request.contains("messages") && request["messages"].is_array(),
        "chat-template: the request needs \"messages\" (an array)");
  if (request.contains("add_generation_prompt"))
    check(request["add_generation_prompt"].is_boolean(), "chat-template: \"add_generation_prompt\" must be a boolean");
  if (request.contains("tools"))
    check(request["tools"].is_null() || request["tools"].is_array(), "chat-template: \"tools\" must be an array");
  if (request.contains("chat_template_kwargs"))
    check(request["chat_template_kwargs"].is_null() || request["chat_template_kwargs"].is_object(),
          "chat-template: \"chat_template_kwargs\" must be an object");
  return request;
}

}  // namespace

Command add_chat_template_command(CLI::App& app) {
  auto model_dir = std::make_shared<std::string>();
  auto request_path = std::make_shared<std::string>();
  app.add_option("--model", *model_dir, "model or tokenizer folder (tokenizer_config.json / chat_template.jinja)")
      ->required()
      ->check(model_folder());
  app.add_option("--request", *request_path, "request JSON: messages, tools, add_generation_prompt, chat_template_kwargs")
      ->required();
  return [=] {
    const nlohmann::ordered_json request = read_request(*request_path);
    const ChatTemplate chat_template = ChatTemplate::from_model_dir(*model_dir);
    const nlohmann::ordered_json tools = request.value("tools", nlohmann::ordered_json());
    const bool add_generation_prompt = request.value("add_generation_prompt", true);
    const nlohmann::ordered_json kwargs = request.value("chat_template_kwargs", nlohmann::ordered_json::object());
    const std::string prompt = chat_template.render(request["messages"], tools, add_generation_prompt, kwargs);
    check(std::fwrite(prompt.data(), 1, prompt.size(), stdout) == prompt.size() && std::fflush(stdout) == 0,
          "chat-template: writing the prompt to stdout failed");
    return 0;
  };
}

}  // namespace fathom::cli
