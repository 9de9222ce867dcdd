#include "text/tokenizer/unigram_model.h"

#include <algorithm>

#include "text/tokenizer/json_util.h"

namespace fathom::tok {

namespace {

constexpr std::string_view kWhat = "Unigram model";
// SentencePiece's penalty of an unknown character, below the least likely piece.
constexpr double kUnknownPenalty = 10.0;

size_t utf8_length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

class UnigramModel final : public Model {
 public:
  UnigramModel(std::vector<std::string> pieces, std::vector<double> scores, std::optional<int32_t> unk_id,
               bool byte_fallback)
      : pieces_(std::move(pieces)), scores_(std::move(scores)), unk_id_(unk_id), byte_fallback_(byte_fallback) {
    ids_.reserve(pieces_.size());
    for (size_t i = 0; i < pieces_.size(); ++i) {
      ids_[pieces_[i]] = int32_t(i);  // a repeated piece keeps its last id, as Hugging Face's map does
      sorted_.push_back(pieces_[i]);
    }
    std::sort(sorted_.begin(), sorted_.end());
    min_score_ = scores_.empty() ? 0.0 : *std::min_element(scores_.begin(), scores_.end());
  }

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    for (const auto& [begin, end] : best_segmentation(word)) {
      const std::string_view piece = word.substr(begin, end - begin);
      if (auto id = token_to_id(piece)) {
        out.push_back(*id);
        continue;
      }
      if (byte_fallback_ && append_bytes(piece, out)) continue;
      check(unk_id_.has_value(), kWhat, ": \"", piece, "\" is not in the vocabulary and there is no unk_id");
      out.push_back(*unk_id_);
    }
  }

  std::optional<int32_t> token_to_id(std::string_view token) const override {
    const auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* id_to_token(int32_t id) const override {
    return id >= 0 && size_t(id) < pieces_.size() ? &pieces_[size_t(id)] : nullptr;
  }
  int64_t vocab_size() const override { return int64_t(pieces_.size()); }
  int32_t max_id() const override { return int32_t(pieces_.size()) - 1; }

 private:
  struct Node {
    double score = 0;
    int64_t starts_at = -1;  // -1: no path ends here yet
    int32_t id = -1;
  };

  // Viterbi over byte positions, in Hugging Face's order (pieces by increasing length, a
  // later candidate wins only with a strictly higher score), then unknowns fused: the
  // byte ranges of the pieces, left to right.
  std::vector<std::pair<size_t, size_t>> best_segmentation(std::string_view w) const {
    const size_t n = w.size();
    std::vector<Node> best(n + 1);
    best[0].starts_at = 0;
    const double unk_score = min_score_ - kUnknownPenalty;
    for (size_t start = 0; start < n;) {
      const double here = best[start].score;
      const size_t char_len = std::min(utf8_length(static_cast<unsigned char>(w[start])), n - start);
      bool single_char_piece = false;
      // Longer and longer prefixes of the rest, while some piece starts with them (the
      // common-prefix search of Hugging Face's trie, on the sorted pieces).
      auto from = sorted_.begin();
      for (size_t end = start + 1; end <= n; ++end) {
        const std::string_view prefix = w.substr(start, end - start);
        from = std::lower_bound(from, sorted_.end(), prefix);
        if (from == sorted_.end() || from->substr(0, prefix.size()) != prefix) break;
        if (*from != prefix) continue;
        const auto it = ids_.find(prefix);
        const double candidate = here + scores_[size_t(it->second)];
        Node& node = best[end];
        if (node.starts_at < 0 || candidate > node.score) node = {candidate, int64_t(start), it->second};
        if (end - start == char_len) single_char_piece = true;
      }
      if (!single_char_piece) {
        check(unk_id_.has_value(), kWhat, ": a character of \"", w, "\" is in no piece and there is no unk_id");
        Node& node = best[start + char_len];
        const double candidate = here + unk_score;
        if (node.starts_at < 0 || candidate > node.score) node = {candidate, int64_t(start), *unk_id_};
      }
      start += char_len;
    }
    std::vector<std::pair<size_t, size_t>> pieces;
    size_t fused_end = 0;  // end of a run of unknowns being fused (0: none)
    for (size_t end = n; end > 0;) {
      const Node& node = best[end];
      const auto start = size_t(node.starts_at);
      if (unk_id_ && node.id == *unk_id_) {
        if (fused_end == 0) fused_end = end;
      } else {
        if (fused_end != 0) pieces.emplace_back(end, fused_end);
        fused_end = 0;
        pieces.emplace_back(start, end);
      }
      end = start;
    }
    if (fused_end != 0) pieces.emplace_back(0, fused_end);
    std::reverse(pieces.begin(), pieces.end());
    return pieces;
  }

  // <0xXX> pieces for every byte, or false (and nothing appended) when one is missing.
  bool append_bytes(std::string_view piece, std::vector<int32_t>& out) const {
    static const char* hex = "0123456789ABCDEF";
    std::vector<int32_t> ids;
    for (unsigned char b : piece) {
      const std::string name = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
      const auto id = token_to_id(name);
      if (!id) return false;
      ids.push_back(*id);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    return true;
  }

  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  Vocab ids_;
  std::vector<std::string_view> sorted_;  // the pieces in byte order, for prefix search
  std::optional<int32_t> unk_id_;
  bool byte_fallback_;
  double min_score_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_unigram_model(const json& j) {
  const json& vocab = require_field(j, "vocab", kWhat);
  check(vocab.is_array(), kWhat, ": \"vocab\" must be an array of [piece, score]");
  check(vocab.size() <= size_t(kMaxTokenId) + 1, kWhat, ": ", vocab.size(), " pieces are more than ids allow");
  std::vector<std::string> pieces;
  std::vector<double> scores;
  pieces.reserve(vocab.size());
  scores.reserve(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) {
    const json& entry = vocab[i];
    check(entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_number(), kWhat, ": vocab[", i,
          "] must be [piece, score], got ", entry.dump());
    pieces.push_back(entry[0].get<std::string>());
    scores.push_back(entry[1].get<double>());
  }
  std::optional<int32_t> unk_id;
  if (const auto it = j.find("unk_id"); it != j.end() && !it->is_null()) {
    const int32_t id = require_token_id(*it, std::string(kWhat) + ": \"unk_id\"");
    check(size_t(id) < pieces.size(), kWhat, ": unk_id ", id, " is beyond the ", pieces.size(), " pieces");
    unk_id = id;
  }
  return std::make_unique<UnigramModel>(std::move(pieces), std::move(scores), unk_id,
                                        bool_or(j, "byte_fallback", false, kWhat));
}

}  // namespace fathom::tok
