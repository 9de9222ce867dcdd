#include "text/tokenizer/added_tokens.h"

#include "core/error.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/unicode.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {

namespace {

// The code point that ends just before byte `end` of a valid UTF-8 string.
char32_t code_point_before(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return next_code_point(s, start);
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view key, int32_t token) {
  if (nodes.empty()) nodes.emplace_back();
  int32_t node = 0;
  for (unsigned char b : key) {
    int32_t next = -1;
    for (const auto& [c, child] : nodes[size_t(node)].children)
      if (c == b) next = child;
    if (next < 0) {
      next = int32_t(nodes.size());
      nodes[size_t(node)].children.emplace_back(b, next);
      nodes.emplace_back();
    }
    node = next;
  }
  nodes[size_t(node)].token = token;
  first_byte[static_cast<unsigned char>(key[0])] = true;
}

std::optional<std::pair<int32_t, size_t>> AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos) const {
  std::optional<std::pair<int32_t, size_t>> best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    int32_t next = -1;
    for (const auto& [c, child] : nodes[size_t(node)].children)
      if (c == b) {
        next = child;
        break;
      }
    if (next < 0) break;
    node = next;
    if (nodes[size_t(node)].token >= 0) best = std::make_pair(nodes[size_t(node)].token, i + 1 - pos);
  }
  return best;
}

void AddedVocabulary::add(const AddedToken& token, const Normalizer* normalizer) {
  if (token.content.empty()) return;  // Hugging Face ignores empty added tokens
  std::string form = token.content;
  if (token.normalized && normalizer) normalizer->normalize(form);
  // Two contents under one id would leave one of them encoding to an id that
  // decodes to the other (or to nothing once either is redefined).
  if (auto same_id = by_id_.find(token.id); same_id != by_id_.end())
    check(tokens_[same_id->second].content == token.content, "tokenizer.json: added tokens \"",
          tokens_[same_id->second].content, "\" and \"", token.content, "\" both have id ", token.id);
  if (auto it = by_content_.find(token.content); it != by_content_.end()) {
    const size_t index = it->second;
    if (tokens_[index].special && !token.special) special_contents_.erase(token.content);
    by_id_.erase(tokens_[index].id);
    tokens_[index] = token;
    normalized_forms_[index] = form;
    by_id_[token.id] = index;
  } else {
    by_content_.emplace(token.content, tokens_.size());
    by_id_[token.id] = tokens_.size();
    tokens_.push_back(token);
    normalized_forms_.push_back(form);
  }
  if (token.special) special_contents_.insert(token.content);
}

void AddedVocabulary::mark_special(int32_t id) {
  const auto it = by_id_.find(id);
  check(it != by_id_.end(), "added tokens: no added token has id ", id);
  tokens_[it->second].special = true;
  special_contents_.insert(tokens_[it->second].content);
}

void AddedVocabulary::build_tries() {
  raw_trie_ = Trie{};
  normalized_trie_ = Trie{};
  raw_trie_.nodes.emplace_back();
  normalized_trie_.nodes.emplace_back();
  // When two tokens share content only the later (replacing) one is kept, so keys are unique.
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].normalized) {
      if (!normalized_forms_[i].empty()) normalized_trie_.insert(normalized_forms_[i], int32_t(i));
    } else {
      raw_trie_.insert(tokens_[i].content, int32_t(i));
    }
  }
}

std::vector<Segment> AddedVocabulary::split(std::string_view text, bool normalized_tokens) const {
  const Trie& trie = normalized_tokens ? normalized_trie_ : raw_trie_;
  std::vector<Segment> out;
  if (trie.empty()) {
    out.push_back({0, text.size(), -1});
    return out;
  }
  size_t start_offset = 0;  // end of the previous match
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto match = trie.longest_at(text, pos);
    if (!match) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[size_t(match->first)];
    size_t start = pos, stop = pos + match->second;
    pos = stop;  // matching resumes after this match even if it is discarded
    if (token.single_word) {
      const bool start_ok = start == 0 || !is_word_char(code_point_before(text, start));
      size_t after = stop;
      const bool stop_ok = stop == text.size() || !is_word_char(next_code_point(text, after));
      if (!start_ok || !stop_ok) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > 0) {
        const size_t cp_start = [&] {
          size_t k = s - 1;
          while (k > 0 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
          return k;
        }();
        size_t k = cp_start;
        if (!is_whitespace(next_code_point(text, k))) break;
        s = cp_start;
      }
      start = std::max(s, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t k = stop;
        if (!is_whitespace(next_code_point(text, k))) break;
        stop = k;
      }
      // Like Hugging Face, matching resumes at the end of the token itself, not of the spaces.
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset != text.size() || out.empty()) out.push_back({start_offset, text.size(), -1});
  return out;
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

const std::string* AddedVocabulary::decode_form(int32_t id) const {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return nullptr;
  return &normalized_forms_[it->second];
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace fathom::tok
