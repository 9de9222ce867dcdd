#include "server/tool_calls.h"

#include <gtest/gtest.h>

namespace fathom::server {

TEST(ToolCalls, DetectsTheFormatFromTheTemplate) {
  EXPECT_EQ(detect_tool_call_format("...<tool_call>\\n{\"name\": ...}</tool_call>..."), ToolCallFormat::qwen);
  EXPECT_EQ(detect_tool_call_format("{{- \"Environment: ipython\\n\" }}"), ToolCallFormat::llama31);
  EXPECT_EQ(detect_tool_call_format("{{ messages }}"), ToolCallFormat::none);
}

TEST(ToolCalls, ParsesQwenCallsAndKeepsSurroundingText) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const auto parsed = parse_tool_calls(text, ToolCallFormat::qwen);
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(parsed.calls[0].arguments), nlohmann::json({{"city", "Paris"}}));
  EXPECT_EQ(parsed.calls[1].name, "get_time");
  EXPECT_EQ(parsed.calls[1].arguments, "{}");
  EXPECT_EQ(parsed.content, "Let me check.");
}

TEST(ToolCalls, QwenCallWithoutClosingTagAtTheEndOfOutput) {
  const auto parsed = parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n", ToolCallFormat::qwen);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "f");
  EXPECT_EQ(parsed.content, "");
}

TEST(ToolCalls, MalformedQwenCallStaysText) {
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": </tool_call>";
  const auto parsed = parse_tool_calls(text, ToolCallFormat::qwen);
  EXPECT_TRUE(parsed.calls.empty());
  EXPECT_EQ(parsed.content, text);
}

TEST(ToolCalls, ParsesLlama31JsonCalls) {
  auto parsed = parse_tool_calls("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", ToolCallFormat::llama31);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(parsed.calls[0].arguments)["city"], "Paris");

  parsed = parse_tool_calls("<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"x;}\"}}; {\"name\": \"b\", \"parameters\": {}}",
                            ToolCallFormat::llama31);
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].name, "a");
  EXPECT_EQ(nlohmann::json::parse(parsed.calls[0].arguments)["s"], "x;}");
  EXPECT_EQ(parsed.calls[1].name, "b");
}

TEST(ToolCalls, PlainTextIsNotACall) {
  for (auto format : {ToolCallFormat::qwen, ToolCallFormat::llama31, ToolCallFormat::none}) {
    const auto parsed = parse_tool_calls("The weather is {fine}.", format);
    EXPECT_TRUE(parsed.calls.empty());
    EXPECT_EQ(parsed.content, "The weather is {fine}.");
  }
  EXPECT_TRUE(parse_tool_calls("{\"no_name\": 1}", ToolCallFormat::llama31).calls.empty());
}

}  // namespace fathom::server
