#pragma once
// The BPE model of tokenizer.json: vocabulary, ranked merges, and the options Hugging
// Face's BPE has (unk_token, fuse_unk, byte_fallback, continuing_subword_prefix,
// end_of_word_suffix, ignore_merges; dropout is read and ignored: inference is
// deterministic). Merging is rank-ordered with a heap over a
// linked list of symbols, so a word of n characters costs O(n log n).
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer/model.h"

namespace fathom::tok {

class BpeModel final : public Model {
 public:
  // `j` is tokenizer.json's "model" object of type "BPE".
  static std::unique_ptr<BpeModel> from_json(const nlohmann::json& j);

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override;

  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  int64_t vocab_size() const override { return int64_t(vocab_.size()); }
  int32_t max_id() const override { return int32_t(id_to_token_.size()) - 1; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  // Open addressing over (left id, right id) pairs: merging is bound by these lookups.
  class MergeTable {
   public:
    void reserve(size_t n);
    void insert_or_assign(uint64_t key, Merge m);
    const Merge* find(uint64_t key) const {
      for (size_t i = slot(key);; i = (i + 1) & mask_) {
        if (keys_[i] == key) return &values_[i];
        if (keys_[i] == kEmpty) return nullptr;
      }
    }
    size_t size() const { return size_; }

   private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    size_t slot(uint64_t k) const {
      k ^= k >> 33;
      k *= 0xff51afd7ed558ccdULL;
      k ^= k >> 33;
      return size_t(k) & mask_;
    }
    std::vector<uint64_t> keys_;
    std::vector<Merge> values_;
    size_t mask_ = 0;
    size_t size_ = 0;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_token_;
  MergeTable merges_;
  std::vector<int32_t> char_ids_;  // id of each one-character token below U+0800 (-1: none); used without prefix/suffix
  std::optional<int32_t> unk_id_;
  std::optional<std::string> missing_unk_token_;  // unk_token when the vocabulary lacks it
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::vector<int32_t> byte_ids_;  // <0xXX> ids when byte_fallback is on and all 256 exist; -1 otherwise

  // Words shorter than kCacheMaxWordBytes, up to kCacheCapacity of them (as Hugging Face).
  static constexpr size_t kCacheMaxWordBytes = 256;
  static constexpr size_t kCacheCapacity = 10000;
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace fathom::tok
