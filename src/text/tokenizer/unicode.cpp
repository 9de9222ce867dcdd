#include "text/tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "text/tokenizer/utf8.h"

namespace fathom::tok {

namespace {

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

utf8proc_category_t category(char32_t c) { return utf8proc_category(utf8proc_int32_t(c)); }

}  // namespace

namespace {

std::string map_with_utf8proc(std::string_view s, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          utf8proc_ssize_t(s.size()), &out, utf8proc_option_t(options));
  check(n >= 0, "unicode normalization: utf8proc failed: ", n < 0 ? utf8proc_errmsg(n) : "");
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), size_t(n));
}

}  // namespace

std::string normalize_unicode(std::string_view s, NormalForm form) {
  // ASCII characters are starters that every form leaves alone and that never combine
  // with what precedes them, so text can be cut just before any ASCII character: only
  // each run of non-ASCII characters, with the ASCII character before it (which marks
  // in the run may combine with), goes through utf8proc.
  std::string out;
  size_t done = 0;  // s[0, done) is in out
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t start = i > done ? i - 1 : i;
    size_t end = i;
    while (end < s.size() && static_cast<unsigned char>(s[end]) >= 0x80) ++end;
    if (out.empty()) out.reserve(s.size() + 16);
    out.append(s.substr(done, start - done));
    out.append(map_with_utf8proc(s.substr(start, end - start), form));
    done = end;
    i = end;
  }
  if (done == 0) return std::string(s);
  out.append(s.substr(done));
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back(c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c);
    return out;
  }
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = next_code_point(s, pos);
    if (c == 0x0130) {  // İ: the only unconditional multi-character lowercase mapping (SpecialCasing)
      out.append("i\xCC\x87");
      continue;
    }
    append_utf8(out, char32_t(utf8proc_tolower(utf8proc_int32_t(c))));
  }
  return out;
}

bool is_whitespace(char32_t c) {
  // White_Space is the controls \t..\r and U+0085 plus the separators (Zs, Zl, Zp).
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  if (c == 0x85) return true;
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_combining_mark(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

bool is_nonspacing_mark(char32_t c) { return c >= 0x300 && category(c) == UTF8PROC_CATEGORY_MN; }

bool is_other(char32_t c) {
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
      return true;
    default:
      return false;
  }
}

}  // namespace fathom::tok
