#include "text/tokenizer/precompiled.h"

#include <utf8proc.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer/json_util.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {

namespace {

constexpr std::string_view kWhat = "normalizer Precompiled";

std::string base64_decode(std::string_view s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(s.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] != '='; ++i) {
    const int v = value(s[i]);
    check(v >= 0, kWhat, ": precompiled_charsmap is not base64 (byte ", i, ")");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xFF));
    }
  }
  for (; i < s.size(); ++i) check(s[i] == '=', kWhat, ": precompiled_charsmap is not base64 (byte ", i, ")");
  return out;
}

class PrecompiledNormalizer final : public Normalizer {
 public:
  explicit PrecompiledNormalizer(const std::string& blob) {
    check(blob.size() >= 4, kWhat, ": precompiled_charsmap is ", blob.size(), " bytes, too short for its header");
    const uint32_t trie_bytes = uint32_t(uint8_t(blob[0])) | uint32_t(uint8_t(blob[1])) << 8 |
                                uint32_t(uint8_t(blob[2])) << 16 | uint32_t(uint8_t(blob[3])) << 24;
    check(trie_bytes % 4 == 0 && trie_bytes <= blob.size() - 4 && trie_bytes >= 4, kWhat, ": the trie of ", trie_bytes,
          " bytes does not fit the ", blob.size(), "-byte precompiled_charsmap");
    units_.resize(trie_bytes / 4);
    for (size_t k = 0; k < units_.size(); ++k) {
      const size_t at = 4 + k * 4;
      units_[k] = uint32_t(uint8_t(blob[at])) | uint32_t(uint8_t(blob[at + 1])) << 8 |
                  uint32_t(uint8_t(blob[at + 2])) << 16 | uint32_t(uint8_t(blob[at + 3])) << 24;
    }
    replacements_ = blob.substr(4 + trie_bytes);
    const auto bad = first_invalid_utf8(replacements_);
    check(!bad, kWhat, ": the replacement strings are not valid UTF-8 (byte ", bad.value_or(0), ")");
  }

  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t end = grapheme_end(text, pos);
      const std::string_view cluster = std::string_view(text).substr(pos, end - pos);
      const auto whole = cluster.size() < 6 ? replacement(cluster) : std::nullopt;
      if (whole) {
        out.append(*whole);
      } else {
        for (size_t c = 0; c < cluster.size();) {
          const size_t start = c;
          next_code_point(cluster, c);
          const std::string_view ch = cluster.substr(start, c - start);
          if (const auto r = replacement(ch)) out.append(*r);
          else out.append(ch);
        }
      }
      pos = end;
    }
    text = std::move(out);
  }

 private:
  // darts-clone's unit layout.
  static bool has_leaf(uint32_t u) { return ((u >> 8) & 1) == 1; }
  static uint32_t value(uint32_t u) { return u & ((1u << 31) - 1); }
  static uint32_t label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
  static uint32_t offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

  // The replacement of the shortest key that `key` starts with (darts-clone's common
  // prefix search, first result; a NUL byte ends the key), or nullopt.
  std::optional<std::string_view> replacement(std::string_view key) const {
    size_t node = offset(units_[0]);
    for (unsigned char c : key) {
      if (c == 0) break;
      node ^= c;
      if (node >= units_.size()) return std::nullopt;
      const uint32_t unit = units_[node];
      if (label(unit) != c) return std::nullopt;
      node ^= offset(unit);
      if (node >= units_.size()) return std::nullopt;
      if (has_leaf(unit)) {
        const size_t at = value(units_[node]);
        check(at <= replacements_.size(), kWhat, ": the trie points at byte ", at, " of ", replacements_.size(),
              " bytes of replacements");
        const size_t end = replacements_.find('\0', at);
        return std::string_view(replacements_).substr(at, (end == std::string::npos ? replacements_.size() : end) - at);
      }
    }
    return std::nullopt;
  }

  // The end of the extended grapheme cluster that starts at `pos`.
  static size_t grapheme_end(std::string_view s, size_t pos) {
    utf8proc_int32_t state = 0;
    size_t at = pos;
    char32_t prev = next_code_point(s, at);
    while (at < s.size()) {
      size_t next = at;
      const char32_t c = next_code_point(s, next);
      if (utf8proc_grapheme_break_stateful(utf8proc_int32_t(prev), utf8proc_int32_t(c), &state)) break;
      prev = c;
      at = next;
    }
    return at;
  }

  std::vector<uint32_t> units_;
  std::string replacements_;
};

}  // namespace

std::unique_ptr<Normalizer> make_precompiled_normalizer(const json& j) {
  return std::make_unique<PrecompiledNormalizer>(base64_decode(require_string(j, "precompiled_charsmap", kWhat)));
}

}  // namespace fathom::tok
