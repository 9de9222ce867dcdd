#include "text/tokenizer/bpe_model.h"

#include <mutex>
#include <queue>

#include "text/tokenizer/json_util.h"

namespace fathom::tok {

namespace {

constexpr std::string_view kWhat = "BPE model";

std::pair<std::string, std::string> parse_merge(const json& m, size_t rank) {
  if (m.is_string()) {
    const std::string line = m.get<std::string>();
    const size_t space = line.find(' ');
    check(space != std::string::npos && line.find(' ', space + 1) == std::string::npos, kWhat, ": merge ", rank,
          " (\"", line, "\") must be two tokens separated by one space");
    return {line.substr(0, space), line.substr(space + 1)};
  }
  check(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), kWhat, ": merge ", rank,
        " must be \"a b\" or [\"a\", \"b\"]");
  return {m[0].get<std::string>(), m[1].get<std::string>()};
}

}  // namespace

void BpeModel::MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  keys_.assign(cap, kEmpty);
  values_.assign(cap, Merge{0, 0});
  mask_ = cap - 1;
  size_ = 0;
}

void BpeModel::MergeTable::insert_or_assign(uint64_t key, Merge m) {
  if ((size_ + 1) * 2 > keys_.size()) {  // grow: rehash everything into twice the room
    MergeTable bigger;
    bigger.reserve(std::max<size_t>(size_ + 1, keys_.size()));
    for (size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != kEmpty) bigger.insert_or_assign(keys_[i], values_[i]);
    *this = std::move(bigger);
  }
  for (size_t i = slot(key);; i = (i + 1) & mask_) {
    if (keys_[i] == key) {
      values_[i] = m;
      return;
    }
    if (keys_[i] == kEmpty) {
      keys_[i] = key;
      values_[i] = m;
      ++size_;
      return;
    }
  }
}

std::unique_ptr<BpeModel> BpeModel::from_json(const json& j) {
  auto model = std::make_unique<BpeModel>();
  BpeModel& m = *model;

  // Dropout skips merges at random to augment training data; at inference the merges are
  // all applied (fathom is deterministic), so only its range is checked.
  const auto dropout = j.find("dropout");
  check(dropout == j.end() || dropout->is_null() ||
            (dropout->is_number() && dropout->get<double>() >= 0.0 && dropout->get<double>() <= 1.0),
        kWhat, ": dropout must be null or a probability in [0, 1], got ", dropout == j.end() ? "" : dropout->dump());

  const json& vocab = require_field(j, "vocab", kWhat);
  check(vocab.is_object(), kWhat, ": \"vocab\" must be an object of token -> id");
  m.vocab_.reserve(vocab.size());
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    if (!is_token_id(id)) fail_token_id(id, std::string(kWhat) + ": the id of vocab token \"" + token + "\"");
    const auto i = int32_t(id.get<int64_t>());
    m.vocab_.emplace(token, i);
    max_id = std::max(max_id, i);
  }
  check_id_space(max_id, m.vocab_.size(), std::string(kWhat) + " vocab");
  m.id_to_token_.resize(size_t(max_id + 1));
  m.has_token_.assign(size_t(max_id + 1), false);
  for (const auto& [token, id] : m.vocab_) {
    m.id_to_token_[size_t(id)] = token;
    m.has_token_[size_t(id)] = true;
  }

  m.continuing_subword_prefix_ = optional_string(j, "continuing_subword_prefix", kWhat).value_or("");
  m.end_of_word_suffix_ = optional_string(j, "end_of_word_suffix", kWhat).value_or("");
  m.fuse_unk_ = bool_or(j, "fuse_unk", false, kWhat);
  m.byte_fallback_ = bool_or(j, "byte_fallback", false, kWhat);
  m.ignore_merges_ = bool_or(j, "ignore_merges", false, kWhat);
  if (auto unk = optional_string(j, "unk_token", kWhat)) {
    // Hugging Face loads an unk_token missing from the vocabulary and fails only when a
    // word needs it; so does fathom.
    if (const auto it = m.vocab_.find(*unk); it != m.vocab_.end()) m.unk_id_ = it->second;
    else m.missing_unk_token_ = *unk;
  }
  if (m.byte_fallback_) {
    m.byte_ids_.assign(256, -1);
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const std::string name = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
      if (auto it = m.vocab_.find(name); it != m.vocab_.end()) m.byte_ids_[size_t(b)] = it->second;
    }
  }

  const json& merges = require_field(j, "merges", kWhat);
  check(merges.is_array(), kWhat, ": \"merges\" must be an array");
  m.merges_.reserve(merges.size());
  const size_t prefix_len = m.continuing_subword_prefix_.size();
  int32_t rank = 0;
  for (const auto& item : merges) {
    if (item.is_string() && item.get_ref<const std::string&>().rfind("#version", 0) == 0) continue;
    auto [a, b] = parse_merge(item, size_t(rank));
    const auto ia = m.vocab_.find(a);
    check(ia != m.vocab_.end(), kWhat, ": merge ", rank, " uses \"", a, "\", which is not in the vocabulary");
    const auto ib = m.vocab_.find(b);
    check(ib != m.vocab_.end(), kWhat, ": merge ", rank, " uses \"", b, "\", which is not in the vocabulary");
    check(b.size() >= prefix_len, kWhat, ": merge ", rank, ": \"", b, "\" is shorter than continuing_subword_prefix");
    const std::string merged = a + b.substr(prefix_len);
    const auto im = m.vocab_.find(merged);
    check(im != m.vocab_.end(), kWhat, ": merge ", rank, " makes \"", merged, "\", which is not in the vocabulary");
    m.merges_.insert_or_assign(pair_key(ia->second, ib->second), Merge{rank, im->second});  // a repeated pair keeps its last rank
    ++rank;
  }
  m.char_ids_.assign(0x800, -1);
  for (char32_t c = 0; c < 0x800; ++c) {
    std::string s;
    if (c < 0x80) {
      s.push_back(char(c));
    } else {
      s.push_back(char(0xC0 | (c >> 6)));
      s.push_back(char(0x80 | (c & 0x3F)));
    }
    if (auto it = m.vocab_.find(s); it != m.vocab_.end()) m.char_ids_[c] = it->second;
  }
  return model;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size() || !has_token_[size_t(id)]) return nullptr;
  return &id_to_token_[size_t(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    int32_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  symbols.reserve(w.size());
  auto add = [&](int32_t id, int32_t len) {
    const auto n = int32_t(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, len});
  };

  int32_t unk_pending = -1, unk_len = 0;  // a pending unk (id, bytes), so runs can fuse
  std::string scratch;
  size_t i = 0;
  while (i < w.size()) {
    const auto lead = static_cast<unsigned char>(w[i]);
    const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const size_t len = std::min(n, w.size() - i);
    std::string_view s = w.substr(i, len);
    const bool is_first = i == 0, is_last = i + len == w.size();
    if ((!is_first && !continuing_subword_prefix_.empty()) || (is_last && !end_of_word_suffix_.empty())) {
      scratch.clear();
      if (!is_first) scratch.append(continuing_subword_prefix_);
      scratch.append(s);
      if (is_last) scratch.append(end_of_word_suffix_);
      s = scratch;
    }
    i += len;
    int32_t id = -1;
    if (s.size() == 1) {
      id = char_ids_[static_cast<unsigned char>(s[0]) & 0x7F];
    } else if (s.size() == 2 && len == 2) {
      id = char_ids_[((static_cast<unsigned char>(s[0]) & 0x1F) << 6) | (static_cast<unsigned char>(s[1]) & 0x3F)];
    } else if (auto it = vocab_.find(s); it != vocab_.end()) {
      id = it->second;
    }
    if (id >= 0) {
      if (unk_pending >= 0) {
        add(unk_pending, unk_len);
        unk_pending = -1;
      }
      add(id, int32_t(len));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : s) all = all && byte_ids_[b] >= 0;
      if (all) {
        // Like Hugging Face, a pending unk is not flushed before the byte tokens.
        for (unsigned char b : s) add(byte_ids_[b], 1);
        continue;
      }
    }
    check(!missing_unk_token_, kWhat, ": \"", s, "\" is not in the vocabulary and unk_token \"",
          missing_unk_token_.value_or(""), "\" is not either");
    if (unk_id_) {
      if (unk_pending >= 0 && fuse_unk_) {
        unk_len += int32_t(len);
      } else {
        if (unk_pending >= 0) add(unk_pending, unk_len);
        unk_pending = *unk_id_;
        unk_len = int32_t(len);
      }
    }
    // Without unk_token an unknown character is dropped, as Hugging Face does.
  }
  if (unk_pending >= 0) add(unk_pending, unk_len);

  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
  };
  auto worse = [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> queue(worse);
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const Merge* m = merges_.find(pair_key(symbols[k].id, symbols[k + 1].id)))
      queue.push({m->rank, int32_t(k), m->new_id});
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[size_t(top.pos)];
    if (left.len == 0 || left.next == -1) continue;
    const auto next_pos = size_t(left.next);
    const Symbol right = symbols[next_pos];
    const Merge* current = merges_.find(pair_key(left.id, right.id));
    if (current == nullptr || current->new_id != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    left.len += right.len;
    left.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next >= 0) symbols[size_t(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      const Symbol& p = symbols[size_t(left.prev)];
      if (const Merge* m = merges_.find(pair_key(p.id, left.id))) queue.push({m->rank, left.prev, m->new_id});
    }
    if (left.next >= 0) {
      const Symbol& nx = symbols[size_t(left.next)];
      if (const Merge* m = merges_.find(pair_key(left.id, nx.id))) queue.push({m->rank, top.pos, m->new_id});
    }
  }
  for (const Symbol& s : symbols)
    if (s.len != 0) out.push_back(s.id);
}

}  // namespace fathom::tok
