#include "server/responses_request.h"

namespace fathom::server {

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

const ojson* field(const ojson& o, const char* name) {
  const auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

// A message's content: a string, or parts of text (input_text, output_text, text, refusal).
std::string content_text(const ojson& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "'" + param + "' must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& part = content[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) bad(p, "'" + p + "' needs a 'type'");
    const std::string type = part["type"];
    if (type == "input_text" || type == "output_text" || type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) bad(p + ".text", "'" + p + ".text' must be a string");
      text += part["text"].get<std::string>();
    } else if (type == "refusal") {
      if (part.contains("refusal") && part["refusal"].is_string()) text += part["refusal"].get<std::string>();
    } else {
      bad(p + ".type", "content part type '" + type + "' is not supported (this model reads text only)");
    }
  }
  return text;
}

// Items → chat messages; consecutive function calls join one assistant turn.
void append_items(const ojson& items, const std::string& param, ojson& messages) {
  for (size_t i = 0; i < items.size(); ++i) {
    const ojson& item = items[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!item.is_object()) bad(p, "'" + p + "' must be an object");
    const std::string type = item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>() : "message";
    if (type == "message") {
      if (!item.contains("role") || !item["role"].is_string()) bad(p + ".role", "'" + p + ".role' must be a string");
      std::string role = item["role"];
      if (role == "developer") role = "system";
      if (role != "system" && role != "user" && role != "assistant")
        bad(p + ".role", "'" + p + ".role' must be user, assistant, system or developer");
      messages.push_back({{"role", role}, {"content", content_text(item.value("content", ojson("")), p + ".content")}});
    } else if (type == "function_call") {
      for (const char* key : {"call_id", "name", "arguments"})
        if (!item.contains(key) || !item[key].is_string()) bad(p + "." + key, "'" + p + "." + key + "' must be a string");
      ojson call = {{"id", item["call_id"]},
                    {"type", "function"},
                    {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
      if (!messages.empty() && messages.back()["role"] == "assistant") {
        ojson& last = messages.back();
        if (!last.contains("tool_calls")) last["tool_calls"] = ojson::array();
        last["tool_calls"].push_back(std::move(call));
      } else {
        messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array({std::move(call)})}});
      }
    } else if (type == "function_call_output") {
      if (!item.contains("call_id") || !item["call_id"].is_string())
        bad(p + ".call_id", "'" + p + ".call_id' must be a string");
      const ojson output = item.value("output", ojson(""));
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", item["call_id"]},
                          {"content", output.is_string() ? output.get<std::string>() : content_text(output, p + ".output")}});
    } else if (type == "reasoning") {
      continue;  // the model's earlier reasoning is not shown to it again
    } else {
      bad(p + ".type", "input item type '" + type + "' is not supported (message, function_call, function_call_output)");
    }
  }
}

}  // namespace

std::optional<std::string> previous_response_id(const ojson& body) {
  const ojson* id = field(body, "previous_response_id");
  if (!id) return std::nullopt;
  if (!id->is_string()) bad("previous_response_id", "'previous_response_id' must be a string");
  return id->get<std::string>();
}

ResponsesRequest parse_responses_request(const ojson& body, const ojson& history) {
  ResponsesRequest r;
  r.previous_response_id = previous_response_id(body);
  if (const ojson* store = field(body, "store")) {
    if (!store->is_boolean()) bad("store", "'store' must be a boolean");
    r.store = store->get<bool>();
  }
  const ojson* input = field(body, "input");
  if (!input) bad("input", "'input' is required");
  if (input->is_string()) {
    r.input_items.push_back({{"type", "message"}, {"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    r.input_items = *input;
  } else {
    bad("input", "'input' must be a string or an array of items");
  }

  // The chat request this amounts to, checked by the chat parser.
  ojson chat = ojson::object();
  ojson messages = ojson::array();
  if (const ojson* instructions = field(body, "instructions")) {
    if (!instructions->is_string()) bad("instructions", "'instructions' must be a string");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
    r.echo["instructions"] = *instructions;
  }
  append_items(history, "previous_response_id", messages);
  append_items(r.input_items, "input", messages);
  if (messages.empty()) bad("input", "'input' holds no message");
  chat["messages"] = std::move(messages);

  if (const ojson* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "'tools' must be an array");
    ojson chat_tools = ojson::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string p = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || t.value("type", "") != "function")
        bad(p + ".type", "'" + p + "': only function tools are supported");
      if (!t.contains("name") || !t["name"].is_string()) bad(p + ".name", "'" + p + ".name' must be a string");
      ojson fn = {{"name", t["name"]}};
      if (t.contains("description")) fn["description"] = t["description"];
      fn["parameters"] = t.contains("parameters") && !t["parameters"].is_null() ? t["parameters"] : ojson::object();
      chat_tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!chat_tools.empty()) chat["tools"] = std::move(chat_tools);
    r.echo["tools"] = *tools;
  }
  if (const ojson* choice = field(body, "tool_choice")) {
    chat["tool_choice"] = *choice;  // "auto" | "none" | "required" | {"type": "function", "name"}
    r.echo["tool_choice"] = *choice;
  }
  if (const ojson* text = field(body, "text")) {
    if (!text->is_object()) bad("text", "'text' must be an object");
    if (const ojson* format = field(*text, "format")) {
      if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
        bad("text.format", "'text.format' must be an object with a 'type'");
      const std::string type = (*format)["type"];
      if (type == "json_schema") {
        ojson schema = {{"name", format->value("name", "response")}};
        if (format->contains("schema")) schema["schema"] = (*format)["schema"];
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
      } else if (type == "json_object" || type == "text") {
        chat["response_format"] = {{"type", type}};
      } else {
        bad("text.format.type", "'text.format.type' must be text, json_object or json_schema");
      }
    }
    r.echo["text"] = *text;
  }
  if (const ojson* max = field(body, "max_output_tokens")) chat["max_tokens"] = *max;
  for (const char* key : {"temperature", "top_p", "seed", "stream"})
    if (const ojson* v = field(body, key)) chat[key] = *v;
  for (const char* key : {"temperature", "top_p", "max_output_tokens", "metadata", "parallel_tool_calls", "reasoning", "user"})
    if (const ojson* v = field(body, key)) r.echo[key] = *v;
  r.chat = parse_chat_request(chat);
  if (r.chat.gen.n != 1) bad("n", "the Responses API makes one answer");
  return r;
}

}  // namespace fathom::server
