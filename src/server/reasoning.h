#pragma once
// Splits streamed model text into reasoning (inside <think>…</think>) and the
// answer, for chat templates that have thinking. Text that may be the start of
// a tag is held back, so a tag split across tokens never leaks into either part.
#include <string>
#include <string_view>

namespace fathom::server {

class ReasoningSplitter {
 public:
  // starts_inside: the prompt already opened <think> (the model continues the reasoning).
  explicit ReasoningSplitter(bool starts_inside = false);
  struct Parts {
    std::string reasoning, content;
  };
  Parts push(std::string_view text);
  Parts flush();
  // Inside the reasoning block (its opening tag seen or implied, not yet closed).
  bool in_reasoning() const { return mode_ == Mode::reasoning; }

 private:
  enum class Mode { undecided, reasoning, content };
  Parts drain(bool final);
  Mode mode_;
  std::string pending_;
  bool strip_leading_ = false;  // drop the whitespace right after </think>
};

// True when a chat template knows <think> blocks (Qwen3, DeepSeek-R1 style).
bool template_has_thinking(std::string_view template_source);
// True when the rendered prompt ends inside an open <think> block.
bool prompt_opens_thinking(std::string_view prompt);
// True when the rendered prompt ends with a closed <think></think> block (thinking turned off).
bool prompt_closes_thinking(std::string_view prompt);

}  // namespace fathom::server
