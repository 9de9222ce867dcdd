// Model output text → tool calls (every ToolCallFormat) and the reasoning splitter.
// Tool calls: no throw; without calls the content is the text unchanged; every
// call's arguments from an object are a JSON object. Reasoning: whatever the
// chunking, the parts equal those of the whole text pushed at once, and they
// never hold more than the text.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_chunks.h"
#include "fuzz_common.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace fs = fathom::server;

namespace {

fs::ReasoningSplitter::Parts split(const std::vector<std::string_view>& chunks, bool starts_inside) {
  fs::ReasoningSplitter splitter(starts_inside);
  fs::ReasoningSplitter::Parts all;
  auto add = [&](const fs::ReasoningSplitter::Parts& p) {
    all.reasoning += p.reasoning;
    all.content += p.content;
  };
  for (std::string_view c : chunks) add(splitter.push(c));
  add(splitter.flush());
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  for (auto format : {fs::ToolCallFormat::none, fs::ToolCallFormat::qwen, fs::ToolCallFormat::llama31}) {
    const fs::ParsedToolCalls parsed = fs::parse_tool_calls(text, format);
    if (parsed.calls.empty()) FUZZ_CHECK(parsed.content == text, "no calls but the content changed");
    FUZZ_CHECK(parsed.content.size() <= text.size(), "content longer than the text");
    for (const auto& call : parsed.calls) {
      // The server puts both in JSON responses: they must dump strictly.
      (void)nlohmann::json(call.name).dump();
      (void)nlohmann::json(call.arguments).dump();
    }
  }
  (void)fs::detect_tool_call_format(text);
  (void)fs::template_has_thinking(text);
  (void)fs::prompt_opens_thinking(text);

  for (bool starts_inside : {false, true}) {
    const auto chunkings = fuzz::chunkings(text);
    const auto whole = split(chunkings.back(), starts_inside);
    FUZZ_CHECK(whole.reasoning.size() + whole.content.size() <= text.size(), "parts longer than the text");
    if (!starts_inside && text.find("<think>") == std::string::npos)
      FUZZ_CHECK(whole.reasoning.empty() && whole.content == text, "text without <think> was changed");
    for (size_t i = 0; i + 1 < chunkings.size(); ++i) {
      const auto parts = split(chunkings[i], starts_inside);
      FUZZ_CHECK(parts.reasoning == whole.reasoning && parts.content == whole.content,
                 "chunking %zu changed the split (starts_inside=%d)", i, int(starts_inside));
    }
  }
  return 0;
}
