#pragma once
// Tool calls found while the answer streams, so that text and calls reach the
// client as they are generated instead of all at the end. Qwen/Hermes: text
// outside <tool_call> … </tool_call> passes through at once (only a tail that
// could begin the tag is held back), and each call is emitted when its tag
// closes. Llama 3.1: an answer that begins like a call (a '{' or
// <|python_tag|>) is held to the end and parsed whole, any other answer
// passes through. What finish() returns makes the stream equal to what
// parse_tool_calls gives for the whole text, up to the whitespace that the
// whole-text parser trims around the calls.
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_calls.h"

namespace fathom::server {

class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format) : format_(format) {}

  struct Piece {
    std::string content;          // text to send now
    std::vector<ToolCall> calls;  // calls complete now, in order
  };
  Piece push(std::string_view text);
  // The end of the answer: whatever was held back, parsed.
  Piece finish();
  // Calls emitted so far.
  size_t calls() const { return calls_; }

 private:
  Piece push_qwen();
  ToolCallFormat format_;
  std::string pending_;
  bool inside_ = false;  // Qwen: within <tool_call>
  enum class Llama { undecided, content, call } llama_ = Llama::undecided;
  size_t calls_ = 0;
};

}  // namespace fathom::server
