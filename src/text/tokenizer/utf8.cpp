#include "text/tokenizer/utf8.h"

namespace fathom::tok {

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

char32_t next_code_point(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  auto cont = [&](size_t i) { return char32_t(static_cast<unsigned char>(s[pos + i]) & 0x3F); };
  char32_t cp;
  if (b0 < 0xE0) {
    cp = (char32_t(b0 & 0x1F) << 6) | cont(1);
    pos += 2;
  } else if (b0 < 0xF0) {
    cp = (char32_t(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    pos += 3;
  } else {
    cp = (char32_t(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    pos += 4;
  }
  return cp;
}

namespace {

// How many bytes after s[pos] continue a well-formed sequence (Unicode table 3-7),
// and how many the sequence needs in all; used for both validation and lossy decoding.
struct SequenceCheck {
  size_t valid_prefix;  // bytes that form a prefix of some well-formed sequence
  size_t needed;        // bytes a complete sequence starting with this lead byte has (0: bad lead)
};

SequenceCheck check_sequence(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {1, 1};
  size_t needed;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    needed = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    needed = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    needed = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {0, 0};
  }
  size_t i = 1;
  for (; i < needed && pos + i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    const unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  return {i, needed};
}

}  // namespace

size_t valid_sequence_length(std::string_view s, size_t pos) {
  const SequenceCheck c = check_sequence(s, pos);
  return c.needed != 0 && c.valid_prefix == c.needed ? c.needed : 0;
}

std::optional<size_t> first_invalid_utf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t n = valid_sequence_length(s, pos);
    if (n == 0) return pos;
    pos += n;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      out.push_back(bytes[pos++]);
      continue;
    }
    const SequenceCheck c = check_sequence(bytes, pos);
    if (c.needed != 0 && c.valid_prefix == c.needed) {
      out.append(bytes.substr(pos, c.needed));
      pos += c.needed;
    } else {
      // A bad lead byte, or a truncated/broken sequence: its maximal valid prefix is one U+FFFD.
      out.append(kReplacementChar);
      pos += c.valid_prefix == 0 ? 1 : c.valid_prefix;
    }
  }
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace fathom::tok
