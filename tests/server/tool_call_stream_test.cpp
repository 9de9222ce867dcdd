// Tool calls found while an answer streams, fed in pieces of random sizes:
// the text sent plus the calls equal what the whole-text parser finds (up to
// the whitespace it trims around calls), each call leaves as soon as its tag
// closes, and a malformed call stays text.
#include "server/tool_call_stream.h"

#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

namespace fathom::server {
namespace {

struct Streamed {
  std::string content;
  std::vector<ToolCall> calls;
  std::vector<size_t> calls_at;  // bytes fed when each call came out
};

Streamed stream(std::string_view text, ToolCallFormat format, std::mt19937_64& rng) {
  ToolCallStream s(format);
  Streamed out;
  size_t pos = 0;
  auto take = [&](ToolCallStream::Piece p) {
    out.content += p.content;
    for (auto& c : p.calls) {
      out.calls.push_back(std::move(c));
      out.calls_at.push_back(pos);
    }
  };
  while (pos < text.size()) {
    const size_t n = std::min<size_t>(1 + rng() % 7, text.size() - pos);
    pos += n;
    take(s.push(text.substr(pos - n, n)));
  }
  take(s.finish());
  EXPECT_EQ(s.calls(), out.calls.size());
  return out;
}

std::string trimmed(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

void expect_same_as_whole(std::string_view text, ToolCallFormat format, std::mt19937_64& rng) {
  const ParsedToolCalls whole = parse_tool_calls(text, format);
  const Streamed streamed = stream(text, format, rng);
  ASSERT_EQ(streamed.calls.size(), whole.calls.size()) << text;
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    EXPECT_EQ(streamed.calls[i].name, whole.calls[i].name);
    EXPECT_EQ(streamed.calls[i].arguments, whole.calls[i].arguments);
  }
  if (whole.calls.empty()) EXPECT_EQ(streamed.content, whole.content) << text;
  else EXPECT_EQ(trimmed(streamed.content), whole.content) << text;
}

TEST(ToolCallStream, QwenCallsLeaveAsTheirTagsCloseAndTextPassesThrough) {
  auto rng = testing::fresh_rng();
  const std::string first = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const std::string text = "Let me check. " + first + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (int trial = 0; trial < 200; ++trial) {
    expect_same_as_whole(text, ToolCallFormat::qwen, rng);
    const Streamed s = stream(text, ToolCallFormat::qwen, rng);
    ASSERT_EQ(s.calls_at.size(), 2u);
    // The first call is out within a piece (≤ 7 bytes) of its closing tag, long before the end.
    const size_t closed = std::string("Let me check. ").size() + first.size();
    EXPECT_GE(s.calls_at[0], closed);
    EXPECT_LT(s.calls_at[0], closed + 7);
  }
  for (const char* other : {"no calls at all, but a < and a <tool", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n",
                            "text <tool_call>not json</tool_call> more", "a <tool_call>{\"name\": \"g\"}</tool_call>"})
    for (int trial = 0; trial < 50; ++trial) expect_same_as_whole(other, ToolCallFormat::qwen, rng);
}

TEST(ToolCallStream, QwenTextBeforeACallIsNotHeldBack) {
  ToolCallStream s(ToolCallFormat::qwen);
  EXPECT_EQ(s.push("Hello, wor").content, "Hello, wor");
  EXPECT_EQ(s.push("ld <tool").content, "ld ");  // "<tool" may begin a call
  EXPECT_EQ(s.push("box>").content, "<toolbox>");  // it did not
}

TEST(ToolCallStream, Llama31CallAnswersAreHeldAndOthersPassThrough) {
  auto rng = testing::fresh_rng();
  for (int trial = 0; trial < 100; ++trial) {
    expect_same_as_whole("<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}; {\"name\": \"g\", \"parameters\": {}}",
                         ToolCallFormat::llama31, rng);
    expect_same_as_whole("  {\"name\": \"f\", \"parameters\": {\"a\": \"b\"}}", ToolCallFormat::llama31, rng);
    expect_same_as_whole("The answer is 4.", ToolCallFormat::llama31, rng);
    expect_same_as_whole("{ not a call", ToolCallFormat::llama31, rng);
  }
  ToolCallStream s(ToolCallFormat::llama31);
  EXPECT_EQ(s.push(" The").content, " The");  // plain text goes out at once
  ToolCallStream call(ToolCallFormat::llama31);
  EXPECT_EQ(call.push("{\"name\"").content, "");  // an answer that begins like a call is held
}

// Streamed arguments (a grammar keeps the calls well-formed): each call is
// announced with its name, its arguments' text arrives in pieces that join
// to exactly the text generated, and it ends at its closing tag — however the
// text is cut into pushes.
TEST(ToolCallStream, QwenStreamedArgumentsJoinToTheGeneratedText) {
  auto rng = testing::fresh_rng();
  const std::string args1 = "{\"city\": \"Oslo \\\"}{[\", \"days\": [1, {\"a\": 2}]}", args2 = "{}";
  const std::string text = "\n<tool_call>\n{ \"name\": \"weather\",\n  \"arguments\": " + args1 +
                           "}\n</tool_call>\n<tool_call>\n{\"name\":\"clock\",\"arguments\":" + args2 + "}\n</tool_call>";
  for (int trial = 0; trial < 200; ++trial) {
    ToolCallStream s(ToolCallFormat::qwen, /*stream_arguments=*/true);
    std::vector<ToolCallStream::CallUpdate> updates;
    std::string content;
    size_t pieces = 0;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min(text.size() - at, size_t(1 + rng() % 7));
      auto piece = s.push(std::string_view(text).substr(at, n));
      EXPECT_TRUE(piece.calls.empty());
      content += piece.content;
      pieces += piece.updates.size();
      updates.insert(updates.end(), piece.updates.begin(), piece.updates.end());
      at += n;
    }
    auto last = s.finish();
    EXPECT_TRUE(last.updates.empty() && last.calls.empty());
    std::vector<std::string> names, arguments;
    int open = 0;
    for (const auto& u : updates) {
      if (u.begins) {
        EXPECT_EQ(open, 0);
        open = 1;
        names.push_back(u.name);
        arguments.emplace_back();
      }
      ASSERT_EQ(open, 1);
      arguments.back() += u.arguments;
      if (u.ends) open = 0;
    }
    EXPECT_EQ(open, 0);
    EXPECT_EQ(names, (std::vector<std::string>{"weather", "clock"}));
    EXPECT_EQ(arguments, (std::vector<std::string>{args1, args2}));
    EXPECT_EQ(s.calls(), 2u);
    EXPECT_EQ(content.find_first_not_of('\n'), std::string::npos) << content;
  }
  // A call of another shape is sent whole at its closing tag; one never closed ends at finish().
  ToolCallStream other(ToolCallFormat::qwen, true);
  auto piece = other.push("<tool_call>{\"arguments\": {}, \"name\": \"f\"}</tool_call>");
  ASSERT_EQ(piece.calls.size(), 1u);
  EXPECT_EQ(piece.calls[0].name, "f");
  EXPECT_TRUE(piece.updates.empty());
  // An unforced model may close the tag early: in the header the call is sent whole (here: malformed,
  // so text); in the arguments the call ends there.
  ToolCallStream early(ToolCallFormat::qwen, true);
  piece = early.push("<tool_call>{\"name\": \"f</tool_call> after");
  EXPECT_TRUE(piece.updates.empty() && piece.calls.empty());
  EXPECT_EQ(piece.content + early.finish().content, "<tool_call>{\"name\": \"f</tool_call> after");
  ToolCallStream unbalanced(ToolCallFormat::qwen, true);
  piece = unbalanced.push("<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": [1</tool_call> then text");
  ASSERT_EQ(piece.updates.size(), 1u);
  EXPECT_EQ(piece.updates[0].arguments, "{\"x\": [1");
  EXPECT_TRUE(piece.updates[0].ends);
  EXPECT_EQ(piece.content + unbalanced.finish().content, " then text");
  ToolCallStream cut(ToolCallFormat::qwen, true);
  piece = cut.push("<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": ");
  ASSERT_EQ(piece.updates.size(), 1u);
  EXPECT_TRUE(piece.updates[0].begins);
  EXPECT_EQ(piece.updates[0].arguments, "{\"x\": ");
  const auto end = cut.finish();
  ASSERT_EQ(end.updates.size(), 1u);
  EXPECT_TRUE(end.updates[0].ends);
}

}  // namespace
}  // namespace fathom::server
