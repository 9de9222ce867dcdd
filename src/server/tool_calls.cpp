#include "server/tool_calls.h"

#include "server/bounded_json.h"

namespace fathom::server {

namespace {

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// {"name": str, <args_key>: object|string} → a call; anything else → false.
bool to_call(const nlohmann::ordered_json& j, ToolCall& call) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call.name = j["name"].get<std::string>();
  for (const char* key : {"arguments", "parameters"}) {
    if (!j.contains(key)) continue;
    const auto& args = j[key];
    if (args.is_string()) {
      call.arguments = args.get<std::string>();
    } else if (args.is_object()) {
      call.arguments = args.dump();
    } else {
      return false;
    }
    return true;
  }
  call.arguments = "{}";
  return true;
}

ParsedToolCalls parse_qwen(std::string_view text) {
  constexpr std::string_view open = "<tool_call>", close = "</tool_call>";
  ParsedToolCalls out;
  std::string content;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t begin = text.find(open, pos);
    if (begin == std::string_view::npos) break;
    const size_t end = text.find(close, begin + open.size());
    const std::string_view body = text.substr(begin + open.size(),
                                              (end == std::string_view::npos ? text.size() : end) - begin - open.size());
    ToolCall call;
    const auto j = parse_json_bounded(trim(body));
    if (!to_call(j, call)) break;  // malformed: keep the rest as text
    content += text.substr(pos, begin - pos);
    out.calls.push_back(std::move(call));
    pos = end == std::string_view::npos ? text.size() : end + close.size();
  }
  content += text.substr(std::min(pos, text.size()));
  out.content = std::string(trim(content));
  if (out.calls.empty()) out.content = std::string(text);
  return out;
}

ParsedToolCalls parse_llama31(std::string_view text) {
  ParsedToolCalls out;
  std::string_view body = trim(text);
  constexpr std::string_view tag = "<|python_tag|>";
  if (body.substr(0, tag.size()) == tag) body = trim(body.substr(tag.size()));
  if (body.empty() || body.front() != '{') {
    out.content = std::string(text);
    return out;
  }
  // One object, or several separated by ';'.
  std::vector<std::string_view> parts;
  size_t start = 0;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{') ++depth;
    else if (c == '}') --depth;
    else if (c == ';' && depth == 0) {
      parts.push_back(body.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(body.substr(start));
  for (std::string_view part : parts) {
    if (trim(part).empty()) continue;
    ToolCall call;
    const auto j = parse_json_bounded(trim(part));
    if (!to_call(j, call)) {
      out.calls.clear();
      out.content = std::string(text);
      return out;
    }
    out.calls.push_back(std::move(call));
  }
  if (out.calls.empty()) out.content = std::string(text);
  return out;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view source) {
  if (source.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::qwen;
  if (source.find("<|python_tag|>") != std::string_view::npos ||
      source.find("Environment: ipython") != std::string_view::npos ||
      source.find("\"parameters\": dictionary of argument name") != std::string_view::npos)
    return ToolCallFormat::llama31;
  return ToolCallFormat::none;
}

ParsedToolCalls parse_tool_calls(std::string_view text, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::qwen:
      return parse_qwen(text);
    case ToolCallFormat::llama31:
      return parse_llama31(text);
    case ToolCallFormat::none:
      break;
  }
  return {std::string(text), {}};
}

}  // namespace fathom::server
