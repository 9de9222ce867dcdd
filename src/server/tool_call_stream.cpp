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

namespace {

// Reads `{ "name" : "<name>" , "arguments" :` (any JSON whitespace between)
// from the start of `s`. Returns the offset after it, 0 while `s` could still
// become it, npos when it cannot.
size_t call_header(std::string_view s, std::string& name) {
  size_t i = 0;
  auto ws = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  };
  auto expect = [&](std::string_view word) -> int {  // 1 read, 0 need more, -1 mismatch
    ws();
    for (size_t k = 0; k < word.size(); ++k, ++i) {
      if (i >= s.size()) return 0;
      if (s[i] != word[k]) return -1;
    }
    return 1;
  };
  for (const std::string_view word : {std::string_view("{"), std::string_view("\"name\""), std::string_view(":"),
                                      std::string_view("\"")}) {
    const int r = expect(word);
    if (r <= 0) return r == 0 ? 0 : std::string_view::npos;
  }
  name.clear();
  for (;; ++i) {  // names are plain: an escape is not streamed
    if (i >= s.size()) return 0;
    if (s[i] == '\\') return std::string_view::npos;
    if (s[i] == '"') break;
    name.push_back(s[i]);
  }
  ++i;
  for (const std::string_view word : {std::string_view(","), std::string_view("\"arguments\""), std::string_view(":")}) {
    const int r = expect(word);
    if (r <= 0) return r == 0 ? 0 : std::string_view::npos;
  }
  ws();
  if (i >= s.size()) return 0;
  return s[i] == '{' ? i : std::string_view::npos;
}

}  // namespace

bool ToolCallStream::stream_call(Piece& piece) {
  if (streaming_ == Streaming::header) {
    CallUpdate begin;
    const size_t at = call_header(pending_, begin.name);
    if (at == std::string_view::npos) {
      streaming_ = Streaming::whole;
      return false;
    }
    if (at == 0) {
      if (pending_.find(kClose) == std::string::npos) return true;  // not yet known
      streaming_ = Streaming::whole;  // closed before its header was whole
      return false;
    }
    begin.begins = true;
    piece.updates.push_back(std::move(begin));
    ++calls_;
    streaming_ = Streaming::arguments;
    scan_ = at;
    depth_ = 0;
    in_string_ = escaped_ = false;
  }
  if (streaming_ == Streaming::arguments) {
    const size_t from = scan_;
    for (; scan_ < pending_.size() && streaming_ == Streaming::arguments; ++scan_) {
      const char ch = pending_[scan_];
      if (!in_string_ && pending_.compare(scan_, kClose.size(), kClose) == 0) {
        streaming_ = Streaming::tail;  // closed before its arguments were: the call ends as it is
        break;
      }
      if (in_string_) {
        if (escaped_) escaped_ = false;
        else if (ch == '\\') escaped_ = true;
        else if (ch == '"') in_string_ = false;
      } else if (ch == '"') {
        in_string_ = true;
      } else if (ch == '{' || ch == '[') {
        ++depth_;
      } else if (ch == '}' || ch == ']') {
        if (--depth_ == 0) streaming_ = Streaming::tail;
      }
    }
    if (scan_ > from) {
      if (piece.updates.empty() || piece.updates.back().ends) piece.updates.push_back({});
      piece.updates.back().arguments += pending_.substr(from, scan_ - from);
    }
  }
  if (streaming_ == Streaming::tail) {
    const size_t close = pending_.find(kClose, scan_);
    if (close == std::string::npos) return true;
    if (piece.updates.empty() || piece.updates.back().ends) piece.updates.push_back({});
    piece.updates.back().ends = true;
    pending_.erase(0, close + kClose.size());
    inside_ = false;
    streaming_ = Streaming::no;
  }
  return true;
}

ToolCallStream::Piece ToolCallStream::push_qwen() {
  Piece piece;
  for (;;) {
    if (inside_ && stream_arguments_ && streaming_ != Streaming::whole) {
      if (!stream_call(piece)) continue;  // not streamable: whole, below
      if (inside_) return piece;          // the call goes on
      continue;                           // it ended: look for the next
    }
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
      if (stream_arguments_) {
        streaming_ = Streaming::header;
        continue;
      }
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
    streaming_ = Streaming::no;
  }
}

ToolCallStream::Piece ToolCallStream::finish() {
  Piece piece;
  if (streaming_ == Streaming::arguments || streaming_ == Streaming::tail) {
    // A streamed call the answer never closed (max_tokens): end it as it is.
    piece.updates.push_back({false, {}, {}, true});
    pending_.clear();
    inside_ = false;
    streaming_ = Streaming::no;
    return piece;
  }
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
