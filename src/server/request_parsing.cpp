#include "server/request_parsing.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "server/bounded_json.h"

namespace fathom::server {

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

const ojson* field(const ojson& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number(const ojson& body, const char* name, double lo, double hi, double fallback) {
  const ojson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(name, std::string("'") + name + "' must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(name, std::string("'") + name + "' must be between " + nlohmann::json(lo).dump() + " and " +
                  nlohmann::json(hi).dump() + ", got " + v->dump());
  return x;
}

std::optional<int64_t> integer(const ojson& body, const char* name, int64_t lo, int64_t hi) {
  const ojson* v = field(body, name);
  if (!v) return std::nullopt;
  const auto out_of_range = [&] {
    bad(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                  ", got " + v->dump());
  };
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) out_of_range();
    x = int64_t(u);
  } else if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d) bad(name, std::string("'") + name + "' must be an integer");
    // int64 holds [-2^63, 2^63): converting anything outside is undefined.
    if (d < -0x1p63 || d >= 0x1p63) out_of_range();
    x = int64_t(d);
  } else {
    bad(name, std::string("'") + name + "' must be an integer");
  }
  if (x < lo || x > hi) out_of_range();
  return x;
}

// A string field that may be absent (then `fallback`); any other type is a 400.
std::string text_field(const ojson& object, const char* name, const std::string& param, const std::string& fallback = "") {
  const ojson* v = field(object, name);
  if (!v) return fallback;
  if (!v->is_string()) bad(param, param + ": must be a string");
  return v->get<std::string>();
}

bool boolean(const ojson& body, const char* name, bool fallback) {
  const ojson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(name, std::string("'") + name + "' must be a boolean");
  return v->get<bool>();
}

std::vector<std::string> string_list(const ojson& body, const char* name, size_t max_items) {
  const ojson* v = field(body, name);
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& s : *v) {
      if (!s.is_string()) bad(name, std::string("'") + name + "' must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    bad(name, std::string("'") + name + "' must be a string or an array of strings");
  }
  if (out.size() > max_items) bad(name, std::string("'") + name + "' takes at most " + std::to_string(max_items) + " strings");
  for (const auto& s : out) {
    if (s.empty()) bad(name, std::string("'") + name + "' strings must not be empty");
    if (s.size() > limits::kStopStringBytes)
      bad(name, std::string("'") + name + "' strings may have at most " + std::to_string(limits::kStopStringBytes) +
                    " bytes");
  }
  return out;
}

// Fields shared by OpenAI chat and completions.
GenerationFields parse_openai_generation(const ojson& body, bool chat) {
  GenerationFields g;
  g.max_tokens = integer(body, "max_tokens", 0, INT32_MAX);
  if (chat) {
    if (auto m = integer(body, "max_completion_tokens", 0, INT32_MAX)) g.max_tokens = m;
  }
  g.sampling.temperature = float(number(body, "temperature", 0.0, 2.0, 1.0));
  g.sampling.top_p = float(number(body, "top_p", 0.0, 1.0, 1.0));
  if (g.sampling.top_p == 0.0f) g.sampling.top_p = 1e-6f;  // "only the top token"; the sampler needs p > 0
  g.sampling.top_k = integer(body, "top_k", -1, INT32_MAX).value_or(0);
  if (g.sampling.top_k < 0) g.sampling.top_k = 0;  // -1: off (vLLM)
  g.sampling.min_p = float(number(body, "min_p", 0.0, 1.0, 0.0));
  g.sampling.repetition_penalty = float(number(body, "repetition_penalty", 1e-6, 10.0, 1.0));
  g.presence_penalty = float(number(body, "presence_penalty", -2.0, 2.0, 0.0));
  g.frequency_penalty = float(number(body, "frequency_penalty", -2.0, 2.0, 0.0));
  if (auto seed = integer(body, "seed", INT64_MIN, INT64_MAX)) {
    g.sampling.seed = uint64_t(*seed);
    g.seed_given = true;
  } else {
    g.sampling.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
  }
  g.n = integer(body, "n", 1, kMaxChoices).value_or(1);
  if (const ojson* bias = field(body, "logit_bias")) {
    if (!bias->is_object()) bad("logit_bias", "'logit_bias' must be an object of token id → bias");
    if (bias->size() > limits::kLogitBiasEntries)
      bad("logit_bias", "'logit_bias' may have at most " + std::to_string(limits::kLogitBiasEntries) + " entries");
    for (const auto& [key, value] : bias->items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || id < 0 || id > INT32_MAX) bad("logit_bias", "'logit_bias' key \"" + key + "\" is not a token id");
      if (!value.is_number() || value.get<double>() < -100.0 || value.get<double>() > 100.0)
        bad("logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
      g.logit_bias.emplace_back(int32_t(id), value.get<float>());
    }
  }
  if (chat) {
    if (boolean(body, "logprobs", false))
      g.top_logprobs = int(integer(body, "top_logprobs", 0, limits::kTopLogprobs).value_or(0));
    else if (field(body, "top_logprobs"))
      bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  } else if (auto n = integer(body, "logprobs", 0, limits::kTopLogprobs)) {
    g.top_logprobs = int(*n);
  }
  g.stop = string_list(body, "stop", limits::kStopStrings);
  g.stream = boolean(body, "stream", false);
  if (const ojson* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "'stream_options' must be an object");
    g.include_usage = boolean(*options, "include_usage", false);
  }
  return g;
}

// OpenAI content: a string, or an array of parts of which the text ones count.
std::string content_text(const ojson& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "'" + param + "' must be a string or an array of content parts");
  std::string text;
  for (const auto& part : content) {
    if (part.is_string()) {
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad(param, "'" + param + "' parts must be objects with a 'type'");
    const std::string type = part["type"];
    if (type == "text" || type == "input_text") {
      if (!part.contains("text") || !part["text"].is_string()) bad(param, "a text part needs a string 'text'");
      text += part["text"].get<std::string>();
    } else {
      bad(param, "content part type '" + type + "' is not supported (text only)");
    }
  }
  return text;
}

ojson normalize_tool_calls(const ojson& calls, const std::string& param) {
  if (!calls.is_array()) bad(param, "'" + param + "' must be an array");
  ojson out = ojson::array();
  for (const auto& call : calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      bad(param, "each tool call needs a 'function' object");
    ojson fn = call["function"];
    if (!fn.contains("name") || !fn["name"].is_string()) bad(param, "each tool call function needs a 'name'");
    // Templates expect arguments as an object (Llama 3.1 applies tojson); OpenAI sends a JSON string.
    if (fn.contains("arguments") && fn["arguments"].is_string()) {
      auto parsed = parse_json_bounded(fn["arguments"].get<std::string>());
      if (!parsed.is_discarded()) fn["arguments"] = parsed;
    }
    ojson c = call;
    c["function"] = fn;
    out.push_back(c);
  }
  return out;
}

ojson parse_tools(const ojson& body) {
  const ojson* tools = field(body, "tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) bad("tools", "'tools' must be an array");
  if (tools->size() > limits::kTools) bad("tools", "'tools' may have at most " + std::to_string(limits::kTools) + " tools");
  for (const auto& t : *tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string())
      bad("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  return tools->empty() ? ojson(nullptr) : *tools;
}

// OpenAI's response_format: {"type": "text" | "json_object" | "json_schema",
// "json_schema": {"name", "schema", "strict"}}.
OutputConstraint parse_response_format(const ojson& body) {
  OutputConstraint out;
  const ojson* rf = field(body, "response_format");
  if (!rf || rf->is_null()) return out;
  if (!rf->is_object()) bad("response_format", "'response_format' must be an object");
  const std::string type = text_field(*rf, "type", "response_format.type");
  out.param = "response_format";
  if (type == "text") return {};
  if (type == "json_object") {
    out.kind = OutputConstraint::Kind::json_object;
    return out;
  }
  if (type != "json_schema") bad("response_format.type", "'response_format.type' must be text, json_object or json_schema");
  const ojson* js = field(*rf, "json_schema");
  if (!js || !js->is_object()) bad("response_format.json_schema", "'response_format.json_schema' must be an object");
  if (const ojson* name = field(*js, "name"); name && !name->is_string())
    bad("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
  const ojson* schema = field(*js, "schema");
  if (schema && !schema->is_object() && !schema->is_boolean())
    bad("response_format.json_schema.schema", "'response_format.json_schema.schema' must be an object");
  out.kind = OutputConstraint::Kind::json_schema;
  out.schema = schema ? *schema : ojson(true);
  out.param = "response_format.json_schema.schema";
  return out;
}

bool has_tool(const ojson& tools, const std::string& name) {
  if (!tools.is_array()) return false;
  return std::any_of(tools.begin(), tools.end(), [&](const ojson& t) { return t["function"]["name"] == name; });
}

}  // namespace

ojson parse_body(const std::string& body) {
  std::string error;
  ojson j = parse_json_bounded(body, &error,
                               {limits::kJsonDepth, limits::kJsonObjectKeys, limits::kJsonKeys});
  if (j.is_discarded()) throw ApiError(400, "malformed JSON in the request body: " + error);
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

ChatRequest parse_chat_request(const ojson& body) {
  ChatRequest r;
  const ojson* messages = field(body, "messages");
  if (!messages) bad("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) bad("messages", "'messages' must be a non-empty array");
  if (messages->size() > limits::kMessages)
    bad("messages", "'messages' may have at most " + std::to_string(limits::kMessages) + " messages");
  r.messages = ojson::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const ojson& m = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(param, "'" + param + "' must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(param + ".role", "'" + param + ".role' must be a string");
    const std::string role = m["role"];
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")
      bad(param + ".role", "'" + param + ".role' must be system, developer, user, assistant or tool");
    ojson out = m;
    out["role"] = role == "developer" ? "system" : role;
    out["content"] = content_text(m.contains("content") ? m["content"] : ojson(nullptr), param + ".content");
    if (m.contains("tool_calls") && !m["tool_calls"].is_null())
      out["tool_calls"] = normalize_tool_calls(m["tool_calls"], param + ".tool_calls");
    r.messages.push_back(std::move(out));
  }
  r.tools = parse_tools(body);
  std::string choice = "auto";
  r.output = parse_response_format(body);
  if (const ojson* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "auto" && choice != "none" && choice != "required")
        bad("tool_choice", "'tool_choice' must be auto, none, required or a named function");
    } else if (tc->is_object()) {
      // {"type": "function", "function": {"name": ...}} (and the Responses API's flat {"type", "name"}).
      const ojson* fn = field(*tc, "function");
      const ojson* name = fn && fn->is_object() ? field(*fn, "name") : field(*tc, "name");
      if (!name || !name->is_string()) bad("tool_choice", "'tool_choice' must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}");
      choice = "named";
      r.output = {OutputConstraint::Kind::tool_call, nullptr, name->get<std::string>(), "tool_choice"};
      if (!has_tool(r.tools, r.output.tool_name))
        bad("tool_choice", "'tool_choice' names the function '" + r.output.tool_name + "', which is not in 'tools'");
    } else {
      bad("tool_choice", "'tool_choice' must be a string or an object");
    }
  }
  if (choice == "required") {
    if (r.tools.is_null()) bad("tool_choice", "'tool_choice' is required but there are no 'tools'");
    r.output = {OutputConstraint::Kind::tool_call, nullptr, "", "tool_choice"};
  }
  if (choice == "none") r.tools = nullptr;
  r.tools_enabled = !r.tools.is_null();
  if (const ojson* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.chat_template_kwargs = *kw;
  }
  r.gen = parse_openai_generation(body, /*chat=*/true);
  return r;
}

CompletionRequest parse_completion_request(const ojson& body) {
  CompletionRequest r;
  const ojson* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "'prompt' is required");
  if (prompt->is_string()) {
    r.prompt = prompt->get<std::string>();
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    r.prompt = (*prompt)[0].get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
    for (const auto& id : *prompt) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        bad("prompt", "'prompt' token ids must be non-negative integers");
      r.prompt_ids.push_back(int32_t(id.get<int64_t>()));
    }
  } else {
    bad("prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
  }
  if (r.prompt.empty() && r.prompt_ids.empty()) bad("prompt", "'prompt' must not be empty");
  r.gen = parse_openai_generation(body, /*chat=*/false);
  r.output = parse_response_format(body);
  if (r.gen.n > 1) bad("n", "several choices (n > 1) are supported by /v1/chat/completions, not yet by /v1/completions");
  return r;
}

namespace {

std::string block_text(const ojson& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "'" + param + "' must be a string or an array of content blocks");
  std::string text;
  for (const auto& b : content) {
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) bad(param, "content blocks need a 'type'");
    if (b["type"] == "text") {
      if (!b.contains("text") || !b["text"].is_string()) bad(param, "a text block needs a string 'text'");
      text += b["text"].get<std::string>();
    }
  }
  return text;
}

}  // namespace

ChatRequest parse_messages_request(const ojson& body) {
  ChatRequest r;
  r.messages = ojson::array();
  if (const ojson* system = field(body, "system")) r.messages.push_back({{"role", "system"}, {"content", block_text(*system, "system")}});
  const ojson* messages = field(body, "messages");
  if (!messages) bad("messages", "messages: Field required");
  if (!messages->is_array() || messages->empty()) bad("messages", "messages: must be a non-empty array");
  if (messages->size() > limits::kMessages)
    bad("messages", "messages: at most " + std::to_string(limits::kMessages) + " messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    const ojson& m = (*messages)[i];
    const std::string param = "messages." + std::to_string(i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad(param, param + ": needs a string 'role'");
    const std::string role = m["role"];
    if (role != "user" && role != "assistant") bad(param + ".role", param + ".role: must be user or assistant");
    if (!m.contains("content")) bad(param + ".content", param + ".content: Field required");
    const ojson& content = m["content"];
    if (content.is_string()) {
      r.messages.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array()) bad(param + ".content", param + ".content: must be a string or an array of blocks");
    std::string text;
    ojson tool_calls = ojson::array();
    for (const auto& b : content) {
      if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
        bad(param + ".content", param + ".content: blocks need a 'type'");
      const std::string type = b["type"];
      if (type == "text") {
        if (!b.contains("text") || !b["text"].is_string()) bad(param + ".content", "a text block needs a string 'text'");
        text += b["text"].get<std::string>();
      } else if (type == "tool_use") {
        const ojson* input = field(b, "input");
        if (input && !input->is_object()) bad(param + ".content", param + ".content: tool_use 'input' must be an object");
        tool_calls.push_back({{"id", text_field(b, "id", param + ".content.id")},
                              {"type", "function"},
                              {"function", {{"name", text_field(b, "name", param + ".content.name")},
                                            {"arguments", input ? *input : ojson::object()}}}});
      } else if (type == "tool_result") {
        const ojson c = b.contains("content") ? b["content"] : ojson("");
        r.messages.push_back({{"role", "tool"},
                              {"tool_call_id", text_field(b, "tool_use_id", param + ".content.tool_use_id")},
                              {"content", block_text(c, param + ".content")}});
      } else {
        bad(param + ".content", param + ".content: block type '" + type + "' is not supported (text, tool_use, tool_result)");
      }
    }
    if (!text.empty() || !tool_calls.empty()) {
      ojson out = {{"role", role}, {"content", text}};
      if (!tool_calls.empty()) out["tool_calls"] = tool_calls;
      r.messages.push_back(std::move(out));
    }
  }
  if (const ojson* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "tools: must be an array");
    if (tools->size() > limits::kTools) bad("tools", "tools: at most " + std::to_string(limits::kTools) + " tools");
    r.tools = ojson::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string param = "tools." + std::to_string(i);
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) bad("tools", "tools: each tool needs a 'name'");
      const ojson* schema = field(t, "input_schema");
      if (schema && !schema->is_object()) bad(param + ".input_schema", param + ".input_schema: must be an object");
      r.tools.push_back({{"type", "function"},
                         {"function", {{"name", t["name"]}, {"description", text_field(t, "description", param + ".description")},
                                       {"parameters", schema ? *schema : ojson::object()}}}});
    }
    if (r.tools.empty()) r.tools = nullptr;
  }
  if (const ojson* tc = field(body, "tool_choice")) {
    if (!tc->is_object()) bad("tool_choice", "tool_choice: must be an object");
    const std::string type = text_field(*tc, "type", "tool_choice.type");
    if (type != "auto" && type != "any" && type != "tool" && type != "none")
      bad("tool_choice.type", "tool_choice.type: must be auto, any, tool or none");
    if ((type == "any" || type == "tool") && r.tools.is_null())
      bad("tool_choice", "tool_choice: " + type + " needs tools");
    if (type == "any") r.output = {OutputConstraint::Kind::tool_call, nullptr, "", "tool_choice"};
    if (type == "tool") {
      r.output = {OutputConstraint::Kind::tool_call, nullptr, text_field(*tc, "name", "tool_choice.name"), "tool_choice"};
      if (!has_tool(r.tools, r.output.tool_name))
        bad("tool_choice.name", "tool_choice.name: no tool is named '" + r.output.tool_name + "'");
    }
    if (type == "none") r.tools = nullptr;
  }
  // Structured outputs: {"type": "json_schema", "schema": {...}}.
  if (const ojson* of = field(body, "output_format"); of && !of->is_null() && r.output.kind == OutputConstraint::Kind::none) {
    if (!of->is_object() || text_field(*of, "type", "output_format.type") != "json_schema")
      bad("output_format", "output_format: must be {\"type\": \"json_schema\", \"schema\": {...}}");
    const ojson* schema = field(*of, "schema");
    if (!schema || !(schema->is_object() || schema->is_boolean()))
      bad("output_format.schema", "output_format.schema: must be an object");
    r.output = {OutputConstraint::Kind::json_schema, *schema, "", "output_format.schema"};
  }
  r.tools_enabled = !r.tools.is_null();
  GenerationFields& g = r.gen;
  const ojson* max_tokens = field(body, "max_tokens");
  if (!max_tokens) bad("max_tokens", "max_tokens: Field required");
  g.max_tokens = integer(body, "max_tokens", 1, INT32_MAX);
  g.sampling.temperature = float(number(body, "temperature", 0.0, 1.0, 1.0));
  g.sampling.top_p = float(number(body, "top_p", 1e-9, 1.0, 1.0));
  g.sampling.top_k = integer(body, "top_k", 0, INT32_MAX).value_or(0);
  g.sampling.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
  g.stop = string_list(body, "stop_sequences", limits::kStopStrings);
  g.stream = boolean(body, "stream", false);
  if (const ojson* thinking = field(body, "thinking")) {
    if (!thinking->is_object()) bad("thinking", "thinking: must be an object");
    const std::string type = text_field(*thinking, "type", "thinking.type");
    if (type != "enabled" && type != "disabled") bad("thinking.type", "thinking.type: must be enabled or disabled");
    r.chat_template_kwargs["enable_thinking"] = type == "enabled";
  }
  return r;
}

TokenizeRequest parse_tokenize_request(const ojson& body) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  TokenizeRequest r;
  const int forms = int(field(body, "content") != nullptr) + int(field(body, "prompt") != nullptr) +
                    int(field(body, "messages") != nullptr);
  if (forms != 1) bad("content", "give exactly one of 'content', 'prompt' or 'messages'");
  if (field(body, "messages")) {
    r.chat = parse_chat_request(body);
  } else if (field(body, "content")) {
    r.text = text_field(body, "content", "content");
    r.add_special_tokens = boolean(body, "add_special", false);
  } else {
    r.text = text_field(body, "prompt", "prompt");
    r.add_special_tokens = boolean(body, "add_special_tokens", true);
  }
  return r;
}

std::vector<int32_t> parse_detokenize_request(const ojson& body, int64_t vocab) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  const ojson* tokens = field(body, "tokens");
  if (!tokens || !tokens->is_array()) bad("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const ojson& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
      bad("tokens", "'tokens' holds " + t.dump() + ", not a token id in [0, " + std::to_string(vocab) + ")");
    ids.push_back(int32_t(t.get<int64_t>()));
  }
  return ids;
}

ChatRequest parse_count_tokens_request(const ojson& body) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  ojson with_limit = body;
  if (!field(body, "max_tokens")) with_limit["max_tokens"] = 1;  // counting generates nothing
  return parse_messages_request(with_limit);
}

}  // namespace fathom::server
