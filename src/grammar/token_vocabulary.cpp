#include "grammar/token_vocabulary.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::grammar {

namespace {
const std::string kNoBytes;
// Longer tokens are left out of the trie (no tokenizer has them; uint16 depth).
constexpr size_t kMaxTokenBytes = 4096;
}  // namespace

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, int64_t size)
    : bytes_(std::move(token_bytes)), size_(size) {
  check(size_ >= int64_t(bytes_.size()), "token vocabulary: the model's vocabulary (", size_,
        ") is smaller than the tokenizer's (", bytes_.size(), ")");
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (!bytes_[id].empty() && bytes_[id].size() <= kMaxTokenBytes) order.push_back(int32_t(id));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });

  // Sorted strings give the preorder directly: each string shares a prefix
  // with the previous one, closes the nodes below it and opens the rest.
  std::vector<uint32_t> path;  // node index per depth - 1
  const std::string* previous = &kNoBytes;
  for (const int32_t id : order) {
    const std::string& s = bytes_[size_t(id)];
    size_t common = 0;
    while (common < previous->size() && common < s.size() && (*previous)[common] == s[common]) ++common;
    while (path.size() > common) {
      nodes_[path.back()].subtree_end = uint32_t(nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(uint32_t(nodes_.size()));
      nodes_.push_back(
          {uint8_t(s[d]), 1, uint16_t(d + 1), 0, uint32_t(token_ids_.size()), uint32_t(token_ids_.size())});
    }
    // A token with the same bytes as the previous one joins its node.
    nodes_[path.back()].tokens_end = uint32_t(token_ids_.size() + 1);
    token_ids_.push_back(id);
    max_depth_ = std::max(max_depth_, int(s.size()));
    previous = &s;
  }
  while (!path.empty()) {
    nodes_[path.back()].subtree_end = uint32_t(nodes_.size());
    path.pop_back();
  }
  // Children come after their parent: one backward pass folds each node's bytes into its parent's.
  subtree_bytes_.assign(nodes_.size(), ByteBits{});
  std::vector<uint32_t> parent(nodes_.size());
  std::vector<uint32_t> open;  // the current path while going forward
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    while (!open.empty() && nodes_[open.back()].subtree_end <= i) open.pop_back();
    parent[i] = open.empty() ? UINT32_MAX : open.back();
    open.push_back(i);
  }
  for (size_t i = nodes_.size(); i-- > 0;) {
    subtree_bytes_[i][nodes_[i].byte >> 6] |= uint64_t(1) << (nodes_[i].byte & 63);
    if (parent[i] == UINT32_MAX) continue;
    for (int w = 0; w < 4; ++w) subtree_bytes_[parent[i]][size_t(w)] |= subtree_bytes_[i][size_t(w)];
    nodes_[parent[i]].height = uint8_t(std::max<int>(nodes_[parent[i]].height, std::min(255, nodes_[i].height + 1)));
  }
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(const Tokenizer& tokenizer, int64_t size) {
  return std::make_shared<const TokenVocabulary>(tokenizer.token_bytes(), size);
}

const std::string& TokenVocabulary::bytes(int32_t id) const {
  return id >= 0 && size_t(id) < bytes_.size() ? bytes_[size_t(id)] : kNoBytes;
}

}  // namespace fathom::grammar
