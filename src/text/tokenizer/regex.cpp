#include "text/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace fathom::tok {

namespace {

constexpr std::string_view kWhiteSpaceClassBody = "\\t-\\r\\x{85}\\p{Z}";
// Oniguruma's Unicode \w (UTS #18's word class): PCRE2's UCP \w is [\p{L}\p{N}_], which
// takes in No (², ①) and leaves out combining marks (the U+0301 of "cafe\u0301").
constexpr std::string_view kWordClassBody = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// One JIT stack and match context per thread: long whitespace runs need more than the
// default 32 KiB of JIT stack.
struct ThreadMatchState {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  ThreadMatchState() {
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    if (stack) pcre2_jit_stack_free(stack);
    if (context) pcre2_match_context_free(context);
  }
};

pcre2_match_context* thread_match_context() {
  thread_local ThreadMatchState state;
  return state.context;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() {
    if (code) pcre2_code_free(code);
  }
};

std::string onig_compatible_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  size_t class_start = 0;  // position in p just after '[' (and an optional '^')
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        if (in_class) out.append(kWhiteSpaceClassBody);
        else out.append("[").append(kWhiteSpaceClassBody).append("]");
      } else if (e == 'S' && !in_class) {
        out.append("[^").append(kWhiteSpaceClassBody).append("]");
      } else if (e == 'w') {
        if (in_class) out.append(kWordClassBody);
        else out.append("[").append(kWordClassBody).append("]");
      } else if (e == 'W' && !in_class) {
        out.append("[^").append(kWordClassBody).append("]");
      } else {
        out.push_back(c);
        out.push_back(e);
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      class_start = i + 1;
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:name:]
        const size_t end = p.find(":]", i + 2);
        if (end != std::string_view::npos) {
          out.append(p.substr(i, end + 2 - i));
          i = end + 1;
          continue;
        }
      }
      if (c == ']' && i != class_start) in_class = false;
    }
    out.push_back(c);
  }
  return out;
}

Regex Regex::compile(std::string_view pattern, std::string_view what) {
  Regex r;
  r.pattern_ = std::string(pattern);
  r.what_ = std::string(what);
  const std::string translated = onig_compatible_pattern(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  check(code != nullptr, what, ": cannot compile regex \"", pattern, "\": ", code ? "" : pcre2_message(error),
        " at offset ", size_t(offset));
  auto holder = std::make_shared<Code>();
  holder->code = code;
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT the interpreter runs; same results
  r.code_ = std::move(holder);
  return r;
}

Regex Regex::literal(std::string_view text, std::string_view what) {
  Regex r;
  r.pattern_ = std::string(text);
  r.what_ = std::string(what);
  r.literal_ = !text.empty();
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                                   PCRE2_UTF | PCRE2_LITERAL, &error, &offset, nullptr);
  check(code != nullptr, what, ": cannot compile literal \"", text, "\": ", code ? "" : pcre2_message(error));
  auto holder = std::make_shared<Code>();
  holder->code = code;
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  r.code_ = std::move(holder);
  return r;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (literal_) {
    for (size_t at = subject.find(pattern_); at != std::string_view::npos; at = subject.find(pattern_, at + pattern_.size()))
      matches.emplace_back(at, at + pattern_.size());
    return matches;
  }
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  check(md != nullptr, what_, ": out of memory for regex match data");
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t start = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (start <= subject.size()) {
    const int rc = pcre2_match(code_->code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, md, thread_match_context());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      fail(what_, ": regex \"", pattern_, "\" failed to match: ", pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (b == e && have_last && e == last_end) {
      // Skip an empty match right after the previous one: move on by one character.
      if (start >= subject.size()) break;
      ++start;
      while (start < subject.size() && (static_cast<unsigned char>(subject[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    matches.emplace_back(b, e);
    have_last = true;
    last_end = e;
    if (e > start) {
      start = e;
    } else {
      // An empty match: the next search begins at the same place, and the rule above skips it.
      start = e;
    }
  }
  pcre2_match_data_free(md);
  return matches;
}

}  // namespace fathom::tok
