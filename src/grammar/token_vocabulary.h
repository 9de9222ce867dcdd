#pragma once
// A model's vocabulary as the grammar constraint sees it: the bytes of every
// token, in a byte trie laid out in preorder, so that the tokens a grammar
// state allows are found in one forward pass that skips every subtree whose
// prefix the grammar rejects (shared prefixes are matched once).
//
// Built once per tokenizer and shared by every request.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fathom {
class Tokenizer;
}

namespace fathom::grammar {

class TokenVocabulary {
 public:
  // token_bytes[id]: the bytes id adds to the text; empty for ids that can
  // never be part of constrained text (special tokens, unnamed ids).
  // `size`: the model's vocabulary (its logits), at least token_bytes.size().
  TokenVocabulary(std::vector<std::string> token_bytes, int64_t size);
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const Tokenizer& tokenizer, int64_t size);

  int64_t size() const { return size_; }
  const std::string& bytes(int32_t id) const;

  // Trie node, in preorder: its children follow it, its subtree ends at
  // subtree_end; tokens [tokens_begin, tokens_end) of token_ids() spell
  // exactly the path to it.
  struct Node {
    uint8_t byte;
    uint8_t height;  // levels in its subtree, itself included (capped at 255)
    uint16_t depth;  // 1 for the root's children
    uint32_t subtree_end;
    uint32_t tokens_begin, tokens_end;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  // The bytes of a node and of every node below it: a walk whose state loops
  // on all of them takes the whole subtree without visiting it.
  using ByteBits = std::array<uint64_t, 4>;
  const std::vector<ByteBits>& subtree_bytes() const { return subtree_bytes_; }
  // The end of the tokens under node i (they start at its tokens_begin).
  uint32_t subtree_tokens_end(size_t i) const { return nodes_[nodes_[i].subtree_end - 1].tokens_end; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  int64_t size_;
  std::vector<Node> nodes_;
  std::vector<ByteBits> subtree_bytes_;
  std::vector<int32_t> token_ids_;
  int max_depth_ = 0;
};

}  // namespace fathom::grammar
