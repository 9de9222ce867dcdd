#include "text/tokenizer/incremental_detokenizer.h"

#include "text/tokenizer/utf8.h"

namespace fathom {

namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && std::string_view(s).substr(s.size() - 3) == tok::kReplacementChar;
}

// Bytes of the longest common prefix of a and b that ends on a character boundary.
size_t common_prefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  while (n > 0 && n < a.size() && (static_cast<unsigned char>(a[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  return emit_from_window(false);
}

std::string IncrementalDetokenizer::flush() { return emit_from_window(true); }

std::string IncrementalDetokenizer::emit_from_window(bool final) {
  // ids_ holds the window: a prefix of emitted tokens, then the tokens not yet emitted.
  const std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_text_.size() && !final) return {};
  if (!final && ends_with_replacement(text)) return {};  // wait for the rest of the character
  std::string out;
  if (text.compare(0, prefix_text_.size(), prefix_text_) == 0) {
    out = text.substr(prefix_text_.size());
  } else {
    // A later token changed text already emitted (only bytes that never formed a
    // character do that): emit what differs after the common part, never retract.
    out = text.substr(common_prefix(text, prefix_text_));
  }
  // Slide the window: the tokens just emitted become the prefix of the next one, unless
  // they decode to nothing on their own (then a decoder's start-of-text rules could
  // see a different first token, so the older prefix stays).
  std::vector<int32_t> next(ids_.begin() + std::ptrdiff_t(read_), ids_.end());
  std::string next_text = tokenizer_->decode(next, skip_special_tokens_);
  if (!next_text.empty()) {
    ids_ = std::move(next);
    prefix_text_ = std::move(next_text);
  } else {
    prefix_text_ = text;
  }
  read_ = ids_.size();
  return out;
}

}  // namespace fathom
