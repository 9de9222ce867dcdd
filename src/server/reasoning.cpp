#include "server/reasoning.h"

#include <algorithm>

namespace fathom::server {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
}  // namespace

ReasoningSplitter::ReasoningSplitter(bool starts_inside) : mode_(starts_inside ? Mode::reasoning : Mode::undecided) {}

ReasoningSplitter::Parts ReasoningSplitter::push(std::string_view text) {
  pending_ += text;
  return drain(false);
}

ReasoningSplitter::Parts ReasoningSplitter::flush() { return drain(true); }

ReasoningSplitter::Parts ReasoningSplitter::drain(bool final) {
  Parts out;
  for (;;) {
    if (mode_ == Mode::undecided) {
      size_t start = 0;
      while (start < pending_.size() && is_space(pending_[start])) ++start;
      const std::string_view rest = std::string_view(pending_).substr(start);
      if (rest.substr(0, kOpen.size()) == kOpen) {
        pending_.erase(0, start + kOpen.size());
        mode_ = Mode::reasoning;
        continue;
      }
      if (!final && kOpen.substr(0, rest.size()) == rest) return out;  // may still become <think>
      mode_ = Mode::content;
      continue;
    }
    if (mode_ == Mode::reasoning) {
      const size_t close = pending_.find(kClose);
      if (close != std::string::npos) {
        out.reasoning += pending_.substr(0, close);
        pending_.erase(0, close + kClose.size());
        mode_ = Mode::content;
        strip_leading_ = true;
        continue;
      }
      const size_t hold = final ? 0 : partial_tag_suffix(pending_, kClose);
      out.reasoning += pending_.substr(0, pending_.size() - hold);
      pending_.erase(0, pending_.size() - hold);
      return out;
    }
    // content
    if (strip_leading_) {
      size_t start = 0;
      while (start < pending_.size() && is_space(pending_[start])) ++start;
      pending_.erase(0, start);
      if (pending_.empty() && !final) return out;
      strip_leading_ = false;
    }
    out.content += pending_;
    pending_.clear();
    return out;
  }
}

bool template_has_thinking(std::string_view template_source) {
  return template_source.find(kOpen) != std::string_view::npos && template_source.find(kClose) != std::string_view::npos;
}

namespace {

bool ends_with_tag(std::string_view prompt, std::string_view tag) {
  size_t end = prompt.size();
  while (end > 0 && is_space(prompt[end - 1])) --end;
  const std::string_view trimmed = prompt.substr(0, end);
  return trimmed.size() >= tag.size() && trimmed.substr(trimmed.size() - tag.size()) == tag;
}

}  // namespace

bool prompt_opens_thinking(std::string_view prompt) { return ends_with_tag(prompt, kOpen); }

bool prompt_closes_thinking(std::string_view prompt) { return ends_with_tag(prompt, kClose); }

}  // namespace fathom::server
