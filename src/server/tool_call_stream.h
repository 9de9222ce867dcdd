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
  // stream_arguments (Qwen only): a call of the usual shape {"name": …,
  // "arguments": …} is announced as soon as its name is known and its
  // arguments follow as they are generated, as OpenAI and Anthropic stream
  // them; a call of another shape is still sent whole at its closing tag. A
  // streamed call is sent as the model writes it: well-formed for certain
  // only when a grammar forces it.
  explicit ToolCallStream(ToolCallFormat format, bool stream_arguments = false)
      : format_(format), stream_arguments_(stream_arguments && format == ToolCallFormat::qwen) {}

  // A streamed call's progress: its start (with the name), more of its
  // arguments' text, its end — any of them in one update.
  struct CallUpdate {
    bool begins = false;
    std::string name;
    std::string arguments;
    bool ends = false;
  };
  struct Piece {
    std::string content;              // text to send now
    std::vector<ToolCall> calls;      // calls complete now, in order
    std::vector<CallUpdate> updates;  // streamed calls (stream_arguments), in order
  };
  Piece push(std::string_view text);
  // The end of the answer: whatever was held back, parsed.
  Piece finish();
  // Calls emitted so far.
  size_t calls() const { return calls_; }

 private:
  Piece push_qwen();
  // Streams the call in pending_ (after <tool_call>); false when it is not of
  // the streamable shape (it is then sent whole at its closing tag).
  bool stream_call(Piece& piece);
  ToolCallFormat format_;
  const bool stream_arguments_;
  std::string pending_;
  bool inside_ = false;  // Qwen: within <tool_call>
  // The call being streamed: header read (name sent), scan position in
  // pending_, the arguments value's nesting, and whether it has ended.
  enum class Streaming { no, header, arguments, tail, whole } streaming_ = Streaming::no;
  size_t scan_ = 0;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  enum class Llama { undecided, content, call } llama_ = Llama::undecided;
  size_t calls_ = 0;
};

}  // namespace fathom::server
