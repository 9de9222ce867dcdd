#include "text/jinja/pyformat.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "text/jinja/diagnostics.h"
#include "text/jinja/unicode.h"

namespace fathom::jinja {
namespace {

// width * 10 + digit for a format width or precision, saturating instead of overflowing
// (a saturated width then fails the value-size check).
int append_digit(int n, char digit) {
  const int d = digit - '0';
  if (n < 0) return d;
  if (n > (INT32_MAX - d) / 10) return INT32_MAX;
  return n * 10 + d;
}


void append_hex(std::string& out, uint32_t v, int digits) {
  static const char* kHex = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) out += kHex[(v >> (4 * i)) & 0xF];
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  if (!ensure_ascii) {
    for (char ch : s) {
      const unsigned char c = ch;
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            out += "\\u";
            append_hex(out, c, 4);
          } else {
            out += ch;
          }
      }
    }
  } else {
    for (char32_t c : unicode::decode(s)) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c > 0x7E) {
            if (c >= 0x10000) {
              const char32_t v = c - 0x10000;
              out += "\\u";
              append_hex(out, 0xD800 | (v >> 10), 4);
              out += "\\u";
              append_hex(out, 0xDC00 | (v & 0x3FF), 4);
            } else {
              out += "\\u";
              append_hex(out, c, 4);
            }
          } else {
            out += char(c);
          }
      }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

struct JsonWriter {
  const JsonDumpOptions& opt;
  std::string item_sep;
  std::string key_sep;
  std::string out;

  std::string key_string(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::String: return k.as_string();
      case Value::Kind::Float: return json_float(k.as_float());
      case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
      case Value::Kind::None: return "null";
      case Value::Kind::Int: return std::to_string(k.as_int());
      default: eval_fail("keys must be str, int, float, bool or None, not ", k.type_name());
    }
  }

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *opt.indent;
  }

  void write(const Value& v, int level) {
    // Lists can share storage, so a small value can have a huge text form: check as it grows.
    check_value_size(out.size(), "the JSON text of a value");
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: out += json_float(v.as_float()); return;
      case Value::Kind::String: json_string(out, v.as_string(), opt.ensure_ascii); return;
      case Value::Kind::List: {
        if (v.seq_kind() != SeqKind::List && v.seq_kind() != SeqKind::Tuple)
          eval_fail("Object of type ", v.type_name(), " is not JSON serializable");
        const auto& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        if (opt.indent) newline(level + 1);
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) {
            out += item_sep;
            if (opt.indent) newline(level + 1);
          }
          write(items[i], level + 1);
        }
        if (opt.indent) newline(level);
        out += ']';
        return;
      }
      case Value::Kind::Dict: {
        const Dict& d = v.as_dict();
        if (d.empty()) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& e : d.items()) entries.push_back(&e);
        if (opt.sort_keys) {
          for (const auto* e : entries)
            if (!e->first.is_string())
              unsupported("tojson(sort_keys=true) with non-string keys");
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto* a, auto* b) { return a->first.as_string() < b->first.as_string(); });
        }
        out += '{';
        if (opt.indent) newline(level + 1);
        bool first = true;
        for (const auto* e : entries) {
          if (!first) {
            out += item_sep;
            if (opt.indent) newline(level + 1);
          }
          first = false;
          json_string(out, key_string(e->first), opt.ensure_ascii);
          out += key_sep;
          write(e->second, level + 1);
        }
        if (opt.indent) newline(level);
        out += '}';
        return;
      }
      default: eval_fail("Object of type ", v.type_name(), " is not JSON serializable");
    }
  }
};

// ---- printf-style formatting -------------------------------------------------

struct PercentSpec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char conv = 0;
};

int64_t to_int_for_format(const Value& v, char conv) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  if (v.is_float()) {
    if (conv == 'x' || conv == 'X' || conv == 'o' || conv == 'c')
      eval_fail("%", conv, " format: an integer is required, not float");
    return int64_t(std::trunc(v.as_float()));
  }
  eval_fail("%", conv, " format: a real number is required, not ", v.type_name());
}

std::string c_format(const std::string& spec, double d) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, spec.c_str(), d);
  if (n < 0 || n >= int(sizeof buf)) unsupported("float formatting wider than 500 characters");
  return std::string(buf, n);
}

std::string c_format_int(const std::string& spec, long long v) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, spec.c_str(), v);
  if (n < 0 || n >= int(sizeof buf)) unsupported("integer formatting wider than 500 characters");
  return std::string(buf, n);
}

std::string pad_text(const std::string& s, const PercentSpec& spec) {
  const size_t len = unicode::length(s);
  if (spec.width < 0 || size_t(spec.width) <= len) return s;
  check_value_size(s.size() + (size_t(spec.width) - len), "a formatted field");
  const std::string fill(spec.width - len, ' ');
  return spec.flags.find('-') != std::string::npos ? s + fill : fill + s;
}

std::string format_one_percent(const PercentSpec& spec, const Value& v) {
  // Numbers go through snprintf into 512 bytes: refuse before it pads a huge field.
  const bool text_conv = spec.conv == 's' || spec.conv == 'r' || spec.conv == 'a';
  if (!text_conv && (spec.width > 500 || spec.precision > 500))
    unsupported("number formatting wider than 500 characters");
  std::string cspec = "%" + spec.flags;
  if (spec.width >= 0) cspec += std::to_string(spec.width);
  if (spec.precision >= 0) cspec += "." + std::to_string(spec.precision);
  switch (spec.conv) {
    case 's':
    case 'r':
    case 'a': {
      std::string s = spec.conv == 's' ? py_str(v) : py_repr(v);
      if (spec.precision >= 0) {
        std::u32string u = unicode::decode(s);
        if (u.size() > size_t(spec.precision)) s = unicode::encode(u.substr(0, spec.precision));
      }
      return pad_text(s, spec);
    }
    case 'd':
    case 'i':
    case 'u': return c_format_int(cspec + "lld", to_int_for_format(v, spec.conv));
    case 'x':
    case 'X':
    case 'o': {
      const int64_t i = to_int_for_format(v, spec.conv);
      // Python's '#o' prefix is 0o where C's is 0; C prints negatives as unsigned.
      if (spec.conv == 'o' && spec.flags.find('#') != std::string::npos) unsupported("'%#o' formatting");
      if (i < 0) {
        if (!spec.flags.empty() || spec.width >= 0 || spec.precision >= 0)
          unsupported("flags or width with a negative number in '%", std::string(1, spec.conv), "' formatting");
        return "-" + c_format_int(std::string("%ll") + spec.conv, -i);
      }
      return c_format_int(cspec + "ll" + spec.conv, i);
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      if (!v.is_number()) eval_fail("must be real number, not ", v.type_name());
      const double d = v.number_as_double();
      if (std::isnan(d) || std::isinf(d)) {
        std::string s = std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
        if (spec.conv == 'E' || spec.conv == 'F' || spec.conv == 'G')
          std::transform(s.begin(), s.end(), s.begin(), ::toupper);
        return pad_text(s, spec);
      }
      return c_format(cspec + spec.conv, d);
    }
    case 'c': {
      std::string s;
      if (v.is_string()) {
        if (unicode::length(v.as_string()) != 1) eval_fail("%c requires int or char");
        s = v.as_string();
      } else {
        unicode::append_utf8(s, char32_t(to_int_for_format(v, 'c')));
      }
      return pad_text(s, spec);
    }
    default: unsupported("'%", std::string(1, spec.conv), "' in printf-style formatting");
  }
}

// ---- str.format --------------------------------------------------------------

struct FormatSpec {
  char32_t fill = ' ';
  char align = 0;
  char sign = 0;
  bool alternate = false;
  bool zero = false;
  int width = -1;
  char grouping = 0;
  int precision = -1;
  char type = 0;
};

FormatSpec parse_format_spec(std::string_view spec_text) {
  FormatSpec spec;
  const std::u32string s = unicode::decode(spec_text);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    spec.fill = s[0];
    spec.align = char(s[1]);
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = char(s[0]);
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = char(s[i++]);
  if (i < s.size() && s[i] == 'z') unsupported("the 'z' format option");
  if (i < s.size() && s[i] == '#') spec.alternate = true, ++i;
  if (i < s.size() && s[i] == '0') spec.zero = true, ++i;
  int width = -1;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') width = append_digit(width, s[i++]);
  spec.width = width;
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = char(s[i++]);
  if (i < s.size() && s[i] == '.') {
    ++i;
    int p = -1;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') p = append_digit(p, s[i++]);
    if (p < 0) eval_fail("Format specifier missing precision");
    spec.precision = p;
  }
  if (i < s.size()) spec.type = char(s[i++]);
  if (i != s.size()) eval_fail("Invalid format specifier '", std::string(spec_text), "'");
  return spec;
}

std::string align_text(const std::string& body, const FormatSpec& spec, char default_align) {
  const size_t len = unicode::length(body);
  if (spec.width < 0 || size_t(spec.width) <= len) return body;
  const size_t pad = spec.width - len;
  std::string fill;
  unicode::append_utf8(fill, spec.fill);
  check_value_size(body.size() + pad * fill.size(), "a formatted field");
  auto repeat = [&](size_t n) {
    std::string r;
    for (size_t k = 0; k < n; ++k) r += fill;
    return r;
  };
  char align = spec.align ? spec.align : default_align;
  if (align == '<') return body + repeat(pad);
  if (align == '>') return repeat(pad) + body;
  if (align == '^') return repeat(pad / 2) + body + repeat(pad - pad / 2);
  // '=': padding after the sign
  if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
    return body.substr(0, 1) + repeat(pad) + body.substr(1);
  return repeat(pad) + body;
}

std::string format_value(const Value& v, std::string_view spec_text) {
  if (spec_text.empty()) return py_str(v);
  FormatSpec spec = parse_format_spec(spec_text);
  if (spec.zero && !spec.align) {
    spec.fill = '0';
    spec.align = '=';
  }
  if (spec.grouping) unsupported("digit grouping in format specs");
  if (v.is_string()) {
    if (spec.type && spec.type != 's') eval_fail("Unknown format code '", std::string(1, spec.type), "' for object of type 'str'");
    if (spec.sign || spec.alternate) eval_fail("Sign not allowed in string format specifier");
    std::string s = v.as_string();
    if (spec.precision >= 0) {
      const std::u32string u = unicode::decode(s);
      if (u.size() > size_t(spec.precision)) s = unicode::encode(u.substr(0, spec.precision));
    }
    return align_text(s, spec, '<');
  }
  if (v.is_int() || v.is_bool()) {
    const int64_t i = v.is_bool() ? int64_t(v.as_bool()) : v.as_int();
    const char t = spec.type ? spec.type : 'd';
    if (t == 'd' || t == 'x' || t == 'X' || t == 'o' || t == 'b') {
      if (spec.precision >= 0) eval_fail("Precision not allowed in integer format specifier");
      const uint64_t mag = i < 0 ? uint64_t(0) - uint64_t(i) : uint64_t(i);
      std::string digits;
      if (t == 'b') {
        uint64_t m = mag;
        do digits.insert(digits.begin(), char('0' + (m & 1))), m >>= 1;
        while (m);
      } else {
        char buf[32];
        const int base = t == 'd' ? 10 : t == 'o' ? 8 : 16;
        auto r = std::to_chars(buf, buf + sizeof buf, mag, base);
        digits.assign(buf, r.ptr);
        if (t == 'X') std::transform(digits.begin(), digits.end(), digits.begin(), ::toupper);
      }
      std::string prefix;
      if (spec.alternate && t != 'd') prefix = t == 'b' ? "0b" : t == 'o' ? "0o" : t == 'x' ? "0x" : "0X";
      std::string sign = i < 0 ? "-" : spec.sign == '+' ? "+" : spec.sign == ' ' ? " " : "";
      if (spec.align == '=') {
        FormatSpec inner = spec;
        const size_t head = unicode::length(sign + prefix);
        inner.width = spec.width >= 0 ? std::max(0, spec.width - int(head)) : -1;
        inner.align = '>';
        return sign + prefix + align_text(digits, inner, '>');
      }
      return align_text(sign + prefix + digits, spec, '>');
    }
    if (t == 'c') {
      std::string s;
      unicode::append_utf8(s, char32_t(i));
      return align_text(s, spec, '<');
    }
    // int with a float presentation type
    return format_value(Value(double(i)), spec_text);
  }
  if (v.is_float()) {
    const double d = v.as_float();
    char t = spec.type;
    if (!t) unsupported("float format spec without a presentation type ('", std::string(spec_text), "')");
    if (t != 'e' && t != 'E' && t != 'f' && t != 'F' && t != 'g' && t != 'G' && t != '%')
      eval_fail("Unknown format code '", std::string(1, t), "' for object of type 'float'");
    double x = t == '%' ? d * 100 : d;
    const int prec = spec.precision >= 0 ? spec.precision : 6;
    if (prec > 500) unsupported("float formatting with a precision above 500");  // snprintf buffers 512 bytes
    std::string cspec = "%";
    if (spec.alternate) cspec += '#';
    cspec += "." + std::to_string(prec) + (t == '%' ? 'f' : t);
    std::string body;
    if (std::isnan(x) || std::isinf(x)) {
      body = std::isnan(x) ? "nan" : "inf";
      if (t == 'E' || t == 'F' || t == 'G') std::transform(body.begin(), body.end(), body.begin(), ::toupper);
      if (std::signbit(x) && !std::isnan(x)) body = "-" + body;
    } else {
      body = c_format(cspec, x);
    }
    if (t == '%') body += '%';
    if (body[0] != '-' && spec.sign == '+') body = "+" + body;
    else if (body[0] != '-' && spec.sign == ' ') body = " " + body;
    return align_text(body, spec, '>');
  }
  eval_fail("unsupported format string passed to ", v.type_name(), ".__format__");
}

}  // namespace

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  const bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  const size_t epos = s.find('e');
  const int exp = std::stoi(s.substr(epos + 1));
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (s[i] != '.') digits += s[i];
  const int ndigits = int(digits.size());
  const int decpt = exp + 1;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (decpt <= 0) out = "0." + std::string(-decpt, '0') + digits;
    else if (decpt >= ndigits) out = digits + std::string(decpt - ndigits, '0') + ".0";
    else out = digits.substr(0, decpt) + "." + digits.substr(decpt);
  } else {
    out = digits.substr(0, 1);
    if (ndigits > 1) out += "." + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    const int a = exp < 0 ? -exp : exp;
    if (a < 10) out += '0';
    out += std::to_string(a);
  }
  return negative ? "-" + out : out;
}

std::string py_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out += quote;
  for (char32_t c : unicode::decode(s)) {
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      append_hex(out, c, 2);
    } else if (c < 0x7F) {
      out += char(c);
    } else if (unicode::is_printable(c)) {
      unicode::append_utf8(out, c);
    } else if (c <= 0xFF) {
      out += "\\x";
      append_hex(out, c, 2);
    } else if (c <= 0xFFFF) {
      out += "\\u";
      append_hex(out, c, 4);
    } else {
      out += "\\U";
      append_hex(out, c, 8);
    }
  }
  out += quote;
  return out;
}

namespace {
// Bounds recursion through objects that contain themselves (a namespace holding itself).
struct ReprDepth {
  static inline thread_local uint32_t depth = 0;
  ReprDepth() {
    if (++depth > kMaxNesting) {
      --depth;
      eval_fail("maximum recursion depth exceeded while getting the repr of an object");
    }
  }
  ~ReprDepth() { --depth; }
};
}  // namespace

std::string py_repr(const Value& v) {
  ReprDepth guard;
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::String: return py_string_repr(v.as_string());
    case Value::Kind::List: {
      const ListData& data = v.list_data();
      if (data.kind == SeqKind::Range) {
        std::string out = "range(" + std::to_string(data.range_start) + ", " + std::to_string(data.range_stop);
        if (data.range_step != 1) out += ", " + std::to_string(data.range_step);
        return out + ")";
      }
      std::string out = v.is_tuple() ? "(" : "[";
      const auto& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += py_repr(items[i]);
        check_value_size(out.size(), "the text form of a list");
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      out += v.is_tuple() ? ")" : "]";
      if (data.kind == SeqKind::DictKeys || data.kind == SeqKind::DictValues || data.kind == SeqKind::DictItems)
        return v.type_name() + "(" + out + ")";
      return out;
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.as_dict().items()) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(val);
        check_value_size(out.size(), "the text form of a dict");
      }
      return out + "}";
    }
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return py_float_repr(v.as_float());
    case Value::Kind::String: return v.as_string();
    case Value::Kind::List:
    case Value::Kind::Dict: return py_repr(v);
    case Value::Kind::Generator:
      unsupported("printing a generator (Python prints '<generator object ...>' with a memory address); "
                  "convert it with |list first");
    case Value::Kind::Object: return v.as_object()->to_str();
  }
  return "";
}

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  JsonWriter w{options, options.item_separator.value_or(options.indent ? "," : ", "),
               options.key_separator.value_or(": "), {}};
  w.write(v, 0);
  return std::move(w.out);
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value escape_value(const Value& v) {
  if (v.is_markup()) return v;
  return Value::markup(html_escape(py_str(v)));
}

std::string py_percent_format(std::string_view format, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) positional = args.items();
  else if (args.is_dict()) mapping = &args.as_dict(), positional.push_back(args);
  else positional.push_back(args);
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  size_t i = 0;
  while (i < format.size()) {
    const char c = format[i];
    if (c != '%') {
      out += c;
      ++i;
      continue;
    }
    ++i;
    if (i >= format.size()) eval_fail("incomplete format");
    if (format[i] == '%') {
      out += '%';
      ++i;
      continue;
    }
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string_view::npos) eval_fail("incomplete format key");
      if (!mapping) eval_fail("format requires a mapping");
      const std::string key(format.substr(i + 1, close - i - 1));
      arg = mapping->find(std::string_view(key));
      if (!arg) eval_fail("KeyError: ", py_string_repr(key));
      used_mapping = true;
      i = close + 1;
    }
    PercentSpec spec;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos)
      spec.flags += format[i++];
    if (i < format.size() && format[i] == '*') unsupported("'*' width in printf-style formatting");
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') spec.width = append_digit(spec.width, format[i++]);
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9')
        spec.precision = append_digit(spec.precision, format[i++]);
    }
    while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
    if (i >= format.size()) eval_fail("incomplete format");
    spec.conv = format[i++];
    if (!arg) {
      if (next >= positional.size()) eval_fail("not enough arguments for format string");
      arg = &positional[next++];
    }
    out += format_one_percent(spec, *arg);
  }
  if (!used_mapping && !mapping && next < positional.size())
    eval_fail("not all arguments converted during string formatting");
  return out;
}

std::string py_str_format(std::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  size_t i = 0;
  while (i < format.size()) {
    const char c = format[i];
    if (c == '{') {
      if (i + 1 < format.size() && format[i + 1] == '{') {
        out += '{';
        i += 2;
        continue;
      }
      // find the matching '}' (nested braces only inside the spec)
      size_t j = i + 1;
      int depth = 1;
      while (j < format.size() && depth) {
        if (format[j] == '{') ++depth;
        else if (format[j] == '}') --depth;
        if (depth) ++j;
      }
      if (j >= format.size()) eval_fail("Single '{' encountered in format string");
      std::string_view field(format.substr(i + 1, j - i - 1));
      i = j + 1;
      std::string_view spec;
      char conversion = 0;
      size_t colon = std::string_view::npos, bang = std::string_view::npos;
      for (size_t k = 0; k < field.size(); ++k) {
        if (field[k] == '[') {
          while (k < field.size() && field[k] != ']') ++k;
          continue;
        }
        if (field[k] == '!' && bang == std::string_view::npos && colon == std::string_view::npos) bang = k;
        if (field[k] == ':') {
          colon = k;
          break;
        }
      }
      if (colon != std::string_view::npos) spec = field.substr(colon + 1);
      std::string_view name = field.substr(0, std::min(colon, bang));
      if (bang != std::string_view::npos) {
        const size_t end = colon == std::string_view::npos ? field.size() : colon;
        if (end != bang + 2) eval_fail("expected ':' after conversion specifier");
        conversion = field[bang + 1];
      }
      if (spec.find('{') != std::string_view::npos) unsupported("nested replacement fields in format specs");
      // the first part of the field name, then .attr / [key] accessors
      size_t k = 0;
      while (k < name.size() && name[k] != '.' && name[k] != '[') ++k;
      std::string_view head = name.substr(0, k);
      Value v;
      if (head.empty()) {
        if (used_manual) eval_fail("cannot switch from manual field specification to automatic field numbering");
        used_auto = true;
        if (auto_index >= args.positional.size())
          eval_fail("Replacement index ", auto_index, " out of range for positional args tuple");
        v = args.positional[auto_index++];
      } else if (std::all_of(head.begin(), head.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        if (used_auto) eval_fail("cannot switch from automatic field numbering to manual field specification");
        used_manual = true;
        const size_t idx = std::stoul(std::string(head));
        if (idx >= args.positional.size())
          eval_fail("Replacement index ", idx, " out of range for positional args tuple");
        v = args.positional[idx];
      } else {
        bool found = false;
        for (const auto& [kname, kval] : args.keywords)
          if (kname == head) v = kval, found = true;
        if (!found) eval_fail("KeyError: ", py_string_repr(head));
      }
      while (k < name.size()) {
        if (name[k] == '.') {
          size_t e = k + 1;
          while (e < name.size() && name[e] != '.' && name[e] != '[') ++e;
          const std::string attr(name.substr(k + 1, e - k - 1));
          unsupported("attribute access ('.", attr, "') inside str.format fields");
        }
        const size_t e = name.find(']', k);
        if (e == std::string_view::npos) eval_fail("Missing ']' in format string");
        const std::string key(name.substr(k + 1, e - k - 1));
        const bool numeric = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        if (v.is_dict()) {
          const Value* found = v.as_dict().find(numeric ? Value(int64_t(std::stoll(key))) : Value(key));
          if (!found) eval_fail("KeyError: ", key);
          v = *found;
        } else if (v.is_list() && numeric) {
          const size_t idx = std::stoul(key);
          if (idx >= v.items().size()) eval_fail("IndexError: list index out of range");
          v = v.items()[idx];
        } else {
          eval_fail("'", v.type_name(), "' object is not subscriptable");
        }
        k = e + 1;
      }
      if (conversion == 'r') v = Value(py_repr(v));
      else if (conversion == 's') v = Value(py_str(v));
      else if (conversion == 'a') unsupported("!a conversion in str.format");
      else if (conversion) eval_fail("Unknown conversion specifier ", std::string(1, conversion));
      out += format_value(v, spec);
    } else if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      eval_fail("Single '}' encountered in format string");
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

}  // namespace fathom::jinja
