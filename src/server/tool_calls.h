#pragma once
// Tool calls parsed out of a model's finished output text, for the two formats
// chat templates teach: Qwen/Hermes (<tool_call>{"name", "arguments"}</tool_call>)
// and Llama 3.1 (a bare {"name", "parameters"} object, optionally after
// <|python_tag|>, several separated by ';').
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fathom::server {

enum class ToolCallFormat { none, qwen, llama31 };

// From the chat template's source: which format its tool prompt asks for.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, serialized
};

struct ParsedToolCalls {
  std::string content;  // the text outside the calls (trimmed); all of it when there are none
  std::vector<ToolCall> calls;
};

// Text that does not hold a well-formed call comes back unchanged as content.
ParsedToolCalls parse_tool_calls(std::string_view text, ToolCallFormat format);

}  // namespace fathom::server
