#include "text/jinja/unicode.h"

#include <algorithm>

namespace fathom::jinja::unicode {
namespace {

bool in_ranges(const Range* ranges, size_t n, char32_t c) {
  const Range* end = ranges + n;
  const Range* it = std::upper_bound(ranges, end, c, [](char32_t v, const Range& r) { return v < r.lo; });
  if (it == ranges) return false;
  --it;
  return c >= it->lo && c <= it->hi;
}

const char* find_mapping(const CaseMapping* map, size_t n, char32_t c) {
  const CaseMapping* end = map + n;
  const CaseMapping* it = std::lower_bound(map, end, c, [](const CaseMapping& m, char32_t v) { return m.cp < v; });
  return (it != end && it->cp == c) ? it->utf8 : nullptr;
}

bool is_case_ignorable(char32_t c) { return in_ranges(tables::kCaseIgnorable, tables::kCaseIgnorableSize, c); }

void append_upper(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += (c >= 'a' && c <= 'z') ? char(c - 32) : char(c);
    return;
  }
  if (const char* m = find_mapping(tables::kUpperMap, tables::kUpperMapSize, c)) out += m;
  else append_utf8(out, c);
}

void append_title(std::string& out, char32_t c) {
  if (c >= 0x80) {
    if (const char* m = find_mapping(tables::kTitleMap, tables::kTitleMapSize, c)) {
      out += m;
      return;
    }
  }
  append_upper(out, c);
}

// Python's lower_ucs4: the capital sigma becomes final sigma at the end of a cased word.
void append_lower(std::string& out, const std::u32string& s, size_t i) {
  const char32_t c = s[i];
  if (c < 0x80) {
    out += (c >= 'A' && c <= 'Z') ? char(c + 32) : char(c);
    return;
  }
  if (c == 0x3A3) {
    ptrdiff_t j = ptrdiff_t(i) - 1;
    while (j >= 0 && is_case_ignorable(s[j])) --j;
    bool final_sigma = j >= 0 && is_cased(s[j]);
    if (final_sigma && i + 1 < s.size()) {
      size_t k = i + 1;
      while (k < s.size() && is_case_ignorable(s[k])) ++k;
      final_sigma = k == s.size() || !is_cased(s[k]);
    }
    append_utf8(out, final_sigma ? 0x3C2 : 0x3C3);
    return;
  }
  if (const char* m = find_mapping(tables::kLowerMap, tables::kLowerMapSize, c)) out += m;
  else append_utf8(out, c);
}

}  // namespace

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    int len;
    char32_t cp;
    if ((b & 0xE0) == 0xC0) len = 2, cp = b & 0x1F;
    else if ((b & 0xF0) == 0xE0) len = 3, cp = b & 0x0F;
    else if ((b & 0xF8) == 0xF0) len = 4, cp = b & 0x07;
    else return false;
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      const unsigned char c = s[i + k];
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    int len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    char32_t cp = len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : len == 4 ? (b & 0x07) : 0xFFFD;
    for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return in_ranges(tables::kSpace, tables::kSpaceSize, c);
}
bool is_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  return !in_ranges(tables::kNonPrintable, tables::kNonPrintableSize, c);
}
bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return in_ranges(tables::kAlpha, tables::kAlphaSize, c);
}
bool is_decimal(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(tables::kDecimal, tables::kDecimalSize, c);
}
bool is_digit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(tables::kDigit, tables::kDigitSize, c);
}
bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(tables::kNumeric, tables::kNumericSize, c);
}
bool is_alnum(char32_t c) { return is_alpha(c) || is_decimal(c) || is_digit(c) || is_numeric(c); }
bool is_lower(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return in_ranges(tables::kLower, tables::kLowerSize, c);
}
bool is_upper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  return in_ranges(tables::kUpper, tables::kUpperSize, c);
}
bool is_cased(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return in_ranges(tables::kCased, tables::kCasedSize, c);
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode(s)) append_upper(out, c);
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const std::u32string u = decode(s);
  for (size_t i = 0; i < u.size(); ++i) append_lower(out, u, i);
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const std::u32string u = decode(s);
  bool previous_is_cased = false;
  for (size_t i = 0; i < u.size(); ++i) {
    if (previous_is_cased) append_lower(out, u, i);
    else append_title(out, u[i]);
    previous_is_cased = is_cased(u[i]);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const std::u32string u = decode(s);
  for (size_t i = 0; i < u.size(); ++i) {
    if (i == 0) append_title(out, u[i]);
    else append_lower(out, u, i);
  }
  return out;
}

std::string swapcase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const std::u32string u = decode(s);
  for (size_t i = 0; i < u.size(); ++i) {
    if (is_upper(u[i])) append_lower(out, u, i);
    else if (is_lower(u[i])) append_upper(out, u[i]);
    else append_utf8(out, u[i]);
  }
  return out;
}

}  // namespace fathom::jinja::unicode
