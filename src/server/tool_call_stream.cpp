#include "server/tool_call_stream.h"

namespace fathom::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kPythonTag = "<|python_tag|>";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(tag.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ToolCallStream::Piece ToolCallStream::push(std::string_view text) {
  pending_ += text;
  if (format_ == ToolCallFormat::qwen) return push_qwen();
  Piece piece;
  if (format_ == ToolCallFormat::llama31 && llama_ == Llama::undecided) {
    const size_t first = pending_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return piece;  // only whitespace so far
    const std::string_view rest = std::string_view(pending_).substr(first);
    if (rest.front() == '{' || rest.substr(0, kPythonTag.size()) == kPythonTag) llama_ = Llama::call;
    else if (rest.size() >= kPythonTag.size() || kPythonTag.substr(0, rest.size()) != rest) llama_ = Llama::content;
    else return piece;  // could still become <|python_tag|>
  }
  if (format_ == ToolCallFormat::llama31 && llama_ == Llama::call) return piece;  // parsed whole at the end
  piece.content = std::move(pending_);
  pending_.clear();
  return piece;
}

ToolCallStream::Piece ToolCallStream::push_qwen() {
  Piece piece;
  for (;;) {
    if (!inside_) {
      const size_t open = pending_.find(kOpen);
      if (open == std::string::npos) {
        const size_t hold = partial_tag(pending_, kOpen);
        piece.content += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return piece;
      }
      piece.content += pending_.substr(0, open);
      pending_.erase(0, open + kOpen.size());
      inside_ = true;
    }
    const size_t close = pending_.find(kClose);
    if (close == std::string::npos) return piece;
    // A whole call: parsed as the whole-text parser parses it.
    const std::string call_text = std::string(kOpen) + pending_.substr(0, close) + std::string(kClose);
    ParsedToolCalls parsed = parse_tool_calls(call_text, ToolCallFormat::qwen);
    if (parsed.calls.empty()) {
      piece.content += call_text;  // malformed: it stays text
    } else {
      calls_ += parsed.calls.size();
      for (auto& c : parsed.calls) piece.calls.push_back(std::move(c));
    }
    pending_.erase(0, close + kClose.size());
    inside_ = false;
  }
}

ToolCallStream::Piece ToolCallStream::finish() {
  Piece piece;
  std::string rest = std::move(pending_);
  pending_.clear();
  if (format_ == ToolCallFormat::qwen && inside_) rest = std::string(kOpen) + rest;  // an unclosed call
  inside_ = false;
  if (rest.empty()) return piece;
  if (format_ == ToolCallFormat::none) {
    piece.content = std::move(rest);
    return piece;
  }
  ParsedToolCalls parsed = parse_tool_calls(rest, format_);
  piece.content = std::move(parsed.content);
  calls_ += parsed.calls.size();
  piece.calls = std::move(parsed.calls);
  return piece;
}

}  // namespace fathom::server
