#pragma once
// Streaming detokenization: feed generated ids one at a time, get back text as soon as
// it is final. Text is held back while it ends in an incomplete UTF-8 character (a
// byte-level or byte-fallback token that is only part of one), so a chunk is never
// half a character, and the chunks concatenate to Tokenizer::decode of all the ids
// (whenever the ids spell valid UTF-8; bytes that never form a character are reported
// as U+FFFD in the chunk where they become final).
#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer/tokenizer.h"

namespace fathom {

class IncrementalDetokenizer {
 public:
  // Keeps a reference: the tokenizer must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Returns the text that became final with this id (often empty).
  std::string push(int32_t id);
  // Returns whatever is still held back (at the end of generation).
  std::string flush();

 private:
  std::string emit_from_window(bool final);

  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  // The window decoded on each push: ids_[0, read_) are the last tokens already emitted
  // (they decode to prefix_text_), so decoders that treat neighbouring tokens or the
  // first token specially see the same context as a full decode; ids_[read_, end) are
  // not emitted yet.
  std::vector<int32_t> ids_;
  size_t read_ = 0;
  std::string prefix_text_;
};

}  // namespace fathom
