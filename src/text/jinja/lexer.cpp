#include "text/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "text/jinja/unicode.h"

namespace fathom::jinja {
namespace {

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options, const std::string& name)
      : options_(options), name_(name) {
    // Jinja normalizes every line break to \n and drops one trailing newline.
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!options_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      const size_t tag = find_tag_start(pos);
      if (tag == std::string::npos) {
        emit(TokenType::Data, src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, tag - pos);
      const char kind = src_[tag + 1];
      char sign = tag + 2 < n && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(tag, &raw_end);
      text = strip_before_tag(std::move(text), sign, kind != '{', line_starting);
      if (!text.empty()) emit(TokenType::Data, text, pos);
      size_t after = tag + 2 + (sign ? 1 : 0);
      if (raw) {
        line_starting = src_[raw_end - 1] == '\n';
        pos = lex_raw_body(raw_end, line_starting, &line_starting);
      } else if (kind == '#') {
        pos = skip_comment(after, tag, &line_starting);
      } else {
        pos = lex_tag(kind == '%', tag, after, &line_starting);
      }
    }
    tokens_.push_back(Token{TokenType::Eof, "", pos_at(n)});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void syntax_error(size_t offset, const std::string& msg) {
    throw TemplateError(TemplateError::Kind::Syntax, name_, pos_at(offset), msg);
  }

  SourcePos pos_at(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = size_t(it - line_starts_.begin());
    const size_t start = line_starts_[line - 1];
    // Tokens come in source order: count code points from the previous position on the
    // same line, so a template of one long line lexes in linear time, not quadratic.
    size_t from = start, column = 0;
    if (column_memo_.line == line && column_memo_.offset <= offset) {
      from = column_memo_.offset;
      column = column_memo_.column;
    }
    column += unicode::length(std::string_view(src_).substr(from, offset - from));
    column_memo_ = {line, offset, column};
    return SourcePos{int(line), int(column) + 1};
  }
  struct ColumnMemo {
    size_t line = 0, offset = 0, column = 0;
  };
  mutable ColumnMemo column_memo_;

  void emit(TokenType type, std::string value, size_t offset) {
    tokens_.push_back(Token{type, std::move(value), pos_at(offset)});
  }

  size_t find_tag_start(size_t pos) const {
    while (true) {
      const size_t b = src_.find('{', pos);
      if (b == std::string::npos || b + 1 >= src_.size()) return std::string::npos;
      const char c = src_[b + 1];
      if (c == '{' || c == '%' || c == '#') return b;
      pos = b + 1;
    }
  }

  // Length of the whitespace code point at `pos`, 0 if there is none (Python's \s).
  size_t space_at(size_t pos) const {
    const unsigned char c = src_[pos];
    if (c < 0x80) return unicode::is_space(c) ? 1 : 0;
    const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (pos + len > src_.size()) return 0;
    const std::u32string cp = unicode::decode(std::string_view(src_).substr(pos, len));
    return cp.size() == 1 && unicode::is_space(cp[0]) ? len : 0;
  }

  size_t skip_spaces(size_t pos) const {
    while (pos < src_.size()) {
      const size_t len = space_at(pos);
      if (!len) break;
      pos += len;
    }
    return pos;
  }

  static std::string rstrip_unicode(const std::string& text) {
    std::u32string u = unicode::decode(text);
    size_t end = u.size();
    while (end > 0 && unicode::is_space(u[end - 1])) --end;
    return unicode::encode(std::u32string_view(u).substr(0, end));
  }

  // The text before a tag loses its trailing whitespace for '-', and with
  // lstrip_blocks the spaces between the line start and a block/comment tag.
  std::string strip_before_tag(std::string text, char sign, bool is_block_or_comment, bool line_starting) const {
    if (sign == '-') return rstrip_unicode(text);
    if (sign == '+' || !options_.lstrip_blocks || !is_block_or_comment) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting) return text;
    const std::u32string tail = unicode::decode(std::string_view(text).substr(l_pos));
    if (tail.empty() || !std::all_of(tail.begin(), tail.end(), [](char32_t c) { return unicode::is_space(c); }))
      return text;
    text.resize(l_pos);
    return text;
  }

  bool starts_with(size_t pos, std::string_view s) const { return std::string_view(src_).substr(pos, s.size()) == s; }

  // {%(-|+|)\s*raw\s*(-%}\s*|%})
  bool match_raw_begin(size_t tag, size_t* end) const {
    size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_spaces(p);
    if (!starts_with(p, "raw")) return false;
    p = skip_spaces(p + 3);
    if (starts_with(p, "-%}")) {
      *end = skip_spaces(p + 3);
      return true;
    }
    if (starts_with(p, "%}")) {
      *end = p + 2;
      return true;
    }
    return false;
  }

  size_t lex_raw_body(size_t start, bool line_starting, bool* line_starting_out) {
    size_t p = start;
    while (true) {
      const size_t b = src_.find("{%", p);
      if (b == std::string::npos) syntax_error(start, "Missing end of raw directive");
      size_t q = b + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_spaces(q);
      if (starts_with(q, "endraw")) {
        q = skip_spaces(q + 6);
        size_t end = 0;
        if (starts_with(q, "+%}")) end = q + 3;
        else if (starts_with(q, "-%}")) end = skip_spaces(q + 3);
        else if (starts_with(q, "%}")) end = q + 2 + (options_.trim_blocks && starts_with(q + 2, "\n") ? 1 : 0);
        if (end) {
          std::string text = strip_before_tag(src_.substr(start, b - start), sign, true, line_starting);
          if (!text.empty()) emit(TokenType::Data, text, start);
          *line_starting_out = src_[end - 1] == '\n';
          return end;
        }
      }
      p = b + 2;
    }
  }

  size_t skip_comment(size_t start, size_t tag, bool* line_starting) {
    for (size_t p = start; p + 1 < src_.size(); ++p) {
      size_t end = 0;
      if (starts_with(p, "+#}")) end = p + 3;
      else if (starts_with(p, "-#}")) end = skip_spaces(p + 3);
      else if (starts_with(p, "#}")) end = p + 2 + (options_.trim_blocks && starts_with(p + 2, "\n") ? 1 : 0);
      if (end) {
        *line_starting = src_[end - 1] == '\n';
        return end;
      }
    }
    syntax_error(tag, "Missing end of comment tag");
  }

  size_t lex_tag(bool block, size_t tag, size_t pos, bool* line_starting) {
    emit(block ? TokenType::BlockBegin : TokenType::VariableBegin, block ? "{%" : "{{", tag);
    std::vector<char> brackets;
    const size_t n = src_.size();
    while (true) {
      if (pos >= n) syntax_error(tag, std::string("unexpected end of template, expected '") + (block ? "%}" : "}}") + "'");
      if (brackets.empty()) {
        size_t end = 0;
        if (block) {
          if (starts_with(pos, "+%}")) end = pos + 3;
          else if (starts_with(pos, "-%}")) end = skip_spaces(pos + 3);
          else if (starts_with(pos, "%}")) end = pos + 2 + (options_.trim_blocks && starts_with(pos + 2, "\n") ? 1 : 0);
        } else {
          if (starts_with(pos, "-}}")) end = skip_spaces(pos + 3);
          else if (starts_with(pos, "}}")) end = pos + 2;
        }
        if (end) {
          emit(block ? TokenType::BlockEnd : TokenType::VariableEnd, block ? "%}" : "}}", pos);
          *line_starting = src_[end - 1] == '\n';
          return end;
        }
      }
      if (const size_t ws = space_at(pos)) {
        pos += ws;
        continue;
      }
      if (size_t end = match_float(pos)) {
        const std::string text = without_underscores(src_.substr(pos, end - pos));
        Token t{TokenType::Float, text, pos_at(pos)};
        t.float_value = std::strtod(text.c_str(), nullptr);
        tokens_.push_back(std::move(t));
        pos = end;
        continue;
      }
      if (size_t end = match_integer(pos)) {
        tokens_.push_back(integer_token(pos, end));
        pos = end;
        continue;
      }
      const char c = src_[pos];
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        size_t end = pos + 1;
        while (end < n && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
        emit(TokenType::Name, src_.substr(pos, end - pos), pos);
        pos = end;
        continue;
      }
      if (c == '\'' || c == '"') {
        pos = lex_string(pos);
        continue;
      }
      static const char* kLongOps[] = {"//", "**", "==", "!=", ">=", "<="};
      bool matched = false;
      for (const char* op : kLongOps) {
        if (starts_with(pos, op)) {
          emit(TokenType::Operator, op, pos);
          pos += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) != std::string_view::npos) {
        if (c == '(' || c == '[' || c == '{') {
          brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        } else if (c == ')' || c == ']' || c == '}') {
          if (brackets.empty()) syntax_error(pos, std::string("unexpected '") + c + "'");
          if (brackets.back() != c)
            syntax_error(pos, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
          brackets.pop_back();
        }
        emit(TokenType::Operator, std::string(1, c), pos);
        ++pos;
        continue;
      }
      std::string ch;
      const std::u32string cp = unicode::decode(std::string_view(src_).substr(pos, 4));
      unicode::append_utf8(ch, cp.empty() ? U'?' : cp[0]);
      syntax_error(pos, "unexpected char '" + ch + "'");
    }
  }

  static std::string without_underscores(std::string s) {
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    return s;
  }

  bool is_digit(size_t p) const { return p < src_.size() && src_[p] >= '0' && src_[p] <= '9'; }

  // (\d+_)*\d+ ; returns the end or 0
  size_t match_digits(size_t p) const {
    if (!is_digit(p)) return 0;
    while (true) {
      while (is_digit(p)) ++p;
      if (p < src_.size() && src_[p] == '_' && is_digit(p + 1)) {
        ++p;
        continue;
      }
      return p;
    }
  }

  // (?<!\.)(\d+_)*\d+((\.(\d+_)*\d+)?e[+\-]?(\d+_)*\d+|\.(\d+_)*\d+)
  size_t match_float(size_t p) const {
    if (p > 0 && src_[p - 1] == '.') return 0;
    size_t q = match_digits(p);
    if (!q) return 0;
    size_t frac_end = 0;
    if (q < src_.size() && src_[q] == '.') frac_end = match_digits(q + 1);
    const size_t after_frac = frac_end ? frac_end : q;
    if (after_frac < src_.size() && (src_[after_frac] == 'e' || src_[after_frac] == 'E')) {
      size_t e = after_frac + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (size_t exp_end = match_digits(e)) return exp_end;
    }
    return frac_end;
  }

  size_t match_integer(size_t p) const {
    const size_t n = src_.size();
    if (!is_digit(p)) return 0;
    if (src_[p] == '0' && p + 1 < n) {
      const char k = char(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      auto valid = [&](char c) {
        c = char(std::tolower(static_cast<unsigned char>(c)));
        return k == 'b' ? (c == '0' || c == '1') : k == 'o' ? (c >= '0' && c <= '7') : std::isxdigit(static_cast<unsigned char>(c));
      };
      if (k == 'b' || k == 'o' || k == 'x') {
        size_t q = p + 2, last = 0;
        while (q < n) {
          if (src_[q] == '_' && q + 1 < n && valid(src_[q + 1])) q += 2, last = q;
          else if (valid(src_[q])) ++q, last = q;
          else break;
        }
        if (last) return last;
      }
    }
    if (src_[p] == '0') {  // 0(_?0)*
      size_t q = p + 1;
      while (q < n) {
        if (src_[q] == '0') ++q;
        else if (src_[q] == '_' && q + 1 < n && src_[q + 1] == '0') q += 2;
        else break;
      }
      return q;
    }
    size_t q = p + 1;  // [1-9](_?\d)*
    while (q < n) {
      if (is_digit(q)) ++q;
      else if (src_[q] == '_' && is_digit(q + 1)) q += 2;
      else break;
    }
    return q;
  }

  Token integer_token(size_t p, size_t end) {
    const std::string text = without_underscores(src_.substr(p, end - p));
    int base = 10;
    size_t skip = 0;
    if (text.size() > 2 && text[0] == '0' && std::isalpha(static_cast<unsigned char>(text[1]))) {
      const char k = char(std::tolower(static_cast<unsigned char>(text[1])));
      base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
      skip = 2;
    }
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str() + skip, nullptr, base);
    if (errno == ERANGE || v > uint64_t(INT64_MAX))
      throw TemplateError(TemplateError::Kind::Unsupported, name_, pos_at(p),
                          "integer literal " + text + " does not fit in 64 bits");
    Token t{TokenType::Integer, text, pos_at(p)};
    t.int_value = int64_t(v);
    return t;
  }

  // A quoted string; its value is decoded the way Python's unicode-escape codec does.
  size_t lex_string(size_t p) {
    const char quote = src_[p];
    size_t q = p + 1;
    std::string raw;
    while (true) {
      if (q >= src_.size()) syntax_error(p, "unexpected char '" + std::string(1, quote) + "' (unterminated string)");
      const char c = src_[q];
      if (c == '\\' && q + 1 < src_.size()) {
        raw += c;
        raw += src_[q + 1];
        q += 2;
        continue;
      }
      if (c == quote) break;
      raw += c;
      ++q;
    }
    emit(TokenType::String, decode_escapes(raw, p), p);
    return q + 1;
  }

  std::string decode_escapes(const std::string& raw, size_t at) {
    std::string out;
    out.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out += raw[i];
        continue;
      }
      const char e = raw[++i];
      auto hex = [&](int digits) -> char32_t {
        char32_t v = 0;
        for (int k = 1; k <= digits; ++k) {
          if (i + k >= raw.size() || !std::isxdigit(static_cast<unsigned char>(raw[i + k])))
            syntax_error(at, "truncated \\x/\\u/\\U escape in string literal");
          const char h = char(std::tolower(static_cast<unsigned char>(raw[i + k])));
          v = v * 16 + char32_t(h <= '9' ? h - '0' : h - 'a' + 10);
        }
        i += digits;
        return v;
      };
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': unicode::append_utf8(out, hex(2)); break;
        case 'u': unicode::append_utf8(out, hex(4)); break;
        case 'U': {
          const char32_t v = hex(8);
          if (v > 0x10FFFF) syntax_error(at, "illegal Unicode character in \\U escape");
          unicode::append_utf8(out, v);
          break;
        }
        case 'N':
          throw TemplateError(TemplateError::Kind::Unsupported, name_, pos_at(at), "\\N{...} escapes in string literals");
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = char32_t(e - '0');
            for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7'; ++k)
              v = v * 8 + char32_t(raw[++i] - '0');
            unicode::append_utf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    return out;
  }

  LexerOptions options_;
  const std::string& name_;
  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options, const std::string& template_name) {
  return Lexer(source, options, template_name).run();
}

std::string describe_token(const Token& t) {
  switch (t.type) {
    case TokenType::Data: return "template data";
    case TokenType::VariableBegin: return "'{{'";
    case TokenType::VariableEnd: return "end of print statement";
    case TokenType::BlockBegin: return "'{%'";
    case TokenType::BlockEnd: return "end of statement block";
    case TokenType::Name: return "name '" + t.value + "'";
    case TokenType::String: return "string";
    case TokenType::Integer: return "integer " + t.value;
    case TokenType::Float: return "float " + t.value;
    case TokenType::Operator: return "'" + t.value + "'";
    case TokenType::Eof: return "end of template";
  }
  return "?";
}

}  // namespace fathom::jinja
