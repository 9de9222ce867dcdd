#pragma once
// Added tokens (special and not): matched in the text before the model sees it, as
// Hugging Face's AddedVocabulary does. Tokens with normalized=false match the raw text;
// those with normalized=true match the text after the normalizer. Matching is
// leftmost-longest, with the single_word, lstrip and rstrip options.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "text/tokenizer/model.h"  // StringHash

namespace fathom::tok {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A piece of text: either an added token's id or plain text for the model.
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;  // -1 for plain text
};

class AddedVocabulary {
 public:
  // Adds or replaces (same content) a token. `normalizer` gives the form that
  // normalized=true tokens match (and decode to). Call build_tries() after the last one.
  void add(const AddedToken& token, const Normalizer* normalizer);
  void mark_special(int32_t id);
  void build_tries();

  // Splits `text` around the raw (normalized=false) or the normalized tokens.
  std::vector<Segment> split(std::string_view text, bool normalized_tokens) const;
  bool has_normalized_tokens() const { return !normalized_trie_.empty(); }

  std::optional<int32_t> token_to_id(std::string_view content) const;
  // The string a token decodes from: its normalized form for normalized=true tokens.
  const std::string* decode_form(int32_t id) const;
  const AddedToken* find(int32_t id) const;
  bool is_special_content(std::string_view content) const { return special_contents_.count(std::string(content)) > 0; }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie over token contents; node 0 is the root.
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;
      int32_t token = -1;  // index into tokens_
    };
    std::vector<Node> nodes;
    bool first_byte[256] = {};
    bool empty() const { return nodes.size() <= 1; }
    void insert(std::string_view key, int32_t token);
    // The token index and length of the longest key starting at text[pos], if any.
    std::optional<std::pair<int32_t, size_t>> longest_at(std::string_view text, size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  std::vector<std::string> normalized_forms_;  // per token: the form it matches in normalized text
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> by_content_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_set<std::string> special_contents_;
  Trie raw_trie_;
  Trie normalized_trie_;
};

}  // namespace fathom::tok
