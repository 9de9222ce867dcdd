// Methods of str, list and dict that templates call (message.content.strip(),
// tool.items(), ...). Methods that mutate are refused like the immutable
// sandbox refuses them; Python methods not implemented here fail by name.
#include <algorithm>
#include <unordered_set>

#include "text/jinja/builtins.h"
#include "text/jinja/diagnostics.h"
#include "text/jinja/objects.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace fathom::jinja {
namespace {

const std::unordered_set<std::string>& str_methods() {
  static const std::unordered_set<std::string> s = {
      "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
      "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
      "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans",
      "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
      "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"};
  return s;
}
const std::unordered_set<std::string>& list_methods() {
  static const std::unordered_set<std::string> s = {"append", "clear",  "copy", "count",   "extend", "index",
                                                    "insert", "pop",    "remove", "reverse", "sort"};
  return s;
}
const std::unordered_set<std::string>& list_mutating() {
  static const std::unordered_set<std::string> s = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  return s;
}
const std::unordered_set<std::string>& dict_methods() {
  static const std::unordered_set<std::string> s = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                                    "pop", "popitem", "setdefault", "update", "values"};
  return s;
}
const std::unordered_set<std::string>& dict_mutating() {
  static const std::unordered_set<std::string> s = {"clear", "pop", "popitem", "setdefault", "update"};
  return s;
}

std::string str_arg(const Value& v, std::string_view method) {
  if (v.is_string()) return v.as_string();
  if (v.is_undefined()) fail_undefined(v);
  eval_fail(method, "() argument must be str, not ", v.type_name());
}

std::vector<std::string> prefixes_arg(const Value& v, std::string_view method) {
  if (v.is_tuple()) {
    std::vector<std::string> out;
    for (const auto& e : v.items()) {
      if (!e.is_string()) eval_fail("tuple for ", method, " must only contain str, not ", e.type_name());
      out.push_back(e.as_string());
    }
    return out;
  }
  if (!v.is_string()) eval_fail(method, " first arg must be str or a tuple of str, not ", v.type_name());
  return {v.as_string()};
}

// Code-point offsets for start/end arguments, clamped like Python slices.
void clamp_range(const Value& start, const Value& end, size_t n, size_t* b, size_t* e) {
  auto conv = [&](const Value& v, int64_t dflt) -> int64_t {
    if (v.is_none()) return dflt;
    int64_t x = arg_int(v, "slice index");
    if (x < 0) x = std::max<int64_t>(0, x + int64_t(n));
    return std::min<int64_t>(x, int64_t(n));
  };
  *b = size_t(conv(start, 0));
  *e = size_t(conv(end, int64_t(n)));
}

std::vector<std::string> split_whitespace(const std::u32string& u, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < u.size() && unicode::is_space(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {  // the rest, trailing whitespace kept
        parts.push_back(unicode::encode(std::u32string_view(u).substr(i)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !unicode::is_space(u[j])) ++j;
      parts.push_back(unicode::encode(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  size_t e = u.size();
  while (true) {
    while (e > 0 && unicode::is_space(u[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {  // the rest, leading whitespace kept
      parts.push_back(unicode::encode(std::u32string_view(u).substr(0, e)));
      break;
    }
    size_t b = e;
    while (b > 0 && !unicode::is_space(u[b - 1])) --b;
    parts.push_back(unicode::encode(std::u32string_view(u).substr(b, e - b)));
    e = b;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) eval_fail("ValueError: empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
      const size_t f = s.find(sep, pos);
      if (f == std::string::npos) break;
      parts.push_back(s.substr(pos, f - pos));
      pos = f + sep.size();
    }
    parts.push_back(s.substr(pos));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t f = s.rfind(sep, end - sep.size());
    if (f == std::string::npos) break;
    parts.push_back(s.substr(f + sep.size(), end - f - sep.size()));
    end = f;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

Value string_list(std::vector<std::string> parts) {
  ValueList out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value(std::move(p)));
  return Value::list(std::move(out));
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int where /*-1 left-justify, 0 center, 1 right*/) {
  const int64_t len = int64_t(unicode::length(s));
  if (width <= len) return s;
  const int64_t total = width - len;
  size_t bytes;
  if (__builtin_mul_overflow(size_t(total), fill.size(), &bytes)) bytes = SIZE_MAX;
  check_value_size(bytes + s.size(), "a padded string");
  auto rep = [&](int64_t n) {
    std::string r;
    for (int64_t i = 0; i < n; ++i) r += fill;
    return r;
  };
  if (where < 0) return s + rep(total);
  if (where > 0) return rep(total) + s;
  // str.center: the extra char goes left when the string length is odd and the padding odd
  const int64_t left = total / 2 + (total & width & 1);
  return rep(left) + s + rep(total - left);
}

std::string fill_arg(const ArgBinder& a, size_t i, std::string_view method) {
  if (!a.has(i)) return " ";
  const std::string f = str_arg(a.get(i), method);
  if (unicode::length(f) != 1) eval_fail("The fill character must be exactly one character long");
  return f;
}

template <typename Pred>
Value all_chars(const std::string& s, Pred pred) {
  const std::u32string u = unicode::decode(s);
  if (u.empty()) return Value(false);
  return Value(std::all_of(u.begin(), u.end(), pred));
}

// Python str.find on code points: returns the code point index or -1.
int64_t find_cp(const std::string& s, const std::string& sub, const Value& start, const Value& end, bool reverse) {
  const std::u32string u = unicode::decode(s);
  const std::u32string x = unicode::decode(sub);
  size_t b, e;
  clamp_range(start, end, u.size(), &b, &e);
  if (b > e || e - b < x.size()) return -1;
  const std::u32string_view window = std::u32string_view(u).substr(b, e - b);
  const size_t f = reverse ? window.rfind(x) : window.find(x);
  return f == std::u32string_view::npos ? -1 : int64_t(b + f);
}

Value call_str_method(const std::string& s, const std::string& name, CallArgs& args) {
  const std::string fn = "str." + name;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgBinder a(fn, args, {"chars"});
    return Value(py_strip(s, a.get_or(0, Value::none()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgBinder a(fn, args, {"sep", "maxsplit"});
    const Value sep = a.get_or(0, Value::none());
    const int64_t maxsplit = a.has(1) ? arg_int(a.get(1), fn) : -1;
    if (sep.is_none()) return string_list(split_whitespace(unicode::decode(s), maxsplit, name == "rsplit"));
    return string_list(split_sep(s, str_arg(sep, fn), maxsplit, name == "rsplit"));
  }
  if (name == "startswith" || name == "endswith") {
    ArgBinder a(fn, args, {"prefix", "start", "end"});
    const auto options = prefixes_arg(a.get(0), name);
    std::string window = s;
    if (a.has(1) || a.has(2)) {
      const std::u32string u = unicode::decode(s);
      size_t b, e;
      clamp_range(a.get_or(1, Value::none()), a.get_or(2, Value::none()), u.size(), &b, &e);
      if (b > e) return Value(false);
      window = unicode::encode(std::u32string_view(u).substr(b, e - b));
    }
    for (const auto& p : options) {
      if (p.size() > window.size()) continue;
      if (name == "startswith" ? window.compare(0, p.size(), p) == 0
                               : window.compare(window.size() - p.size(), p.size(), p) == 0)
        return Value(true);
    }
    return Value(false);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "swapcase") {
    ArgBinder a(fn, args, {});
    if (name == "upper") return Value(unicode::upper(s));
    if (name == "lower") return Value(unicode::lower(s));
    if (name == "title") return Value(unicode::title(s));
    if (name == "capitalize") return Value(unicode::capitalize(s));
    return Value(unicode::swapcase(s));
  }
  if (name == "replace") {
    ArgBinder a(fn, args, {"old", "new", "count"});
    const std::string old = str_arg(a.get(0), fn);
    const std::string repl = str_arg(a.get(1), fn);
    int64_t count = a.has(2) ? arg_int(a.get(2), fn) : -1;
    std::string out;
    if (old.empty()) {
      const std::u32string u = unicode::decode(s);
      for (size_t i = 0; i <= u.size(); ++i) {
        if (count != 0) {
          check_value_size(out.size() + repl.size() + s.size(), "a replaced string");
          out += repl;
          if (count > 0) --count;
        }
        if (i < u.size()) unicode::append_utf8(out, u[i]);
      }
      return Value(std::move(out));
    }
    size_t pos = 0;
    while (count != 0) {
      const size_t f = s.find(old, pos);
      if (f == std::string::npos) break;
      check_value_size(out.size() + (f - pos) + repl.size() + (s.size() - f), "a replaced string");
      out.append(s, pos, f - pos);
      out += repl;
      pos = f + old.size();
      if (count > 0) --count;
    }
    out.append(s, pos, std::string::npos);
    return Value(std::move(out));
  }
  if (name == "join") {
    ArgBinder a(fn, args, {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& item : iterate(a.get(0))) {
      if (!item.is_string()) eval_fail("sequence item: expected str instance, ", item.type_name(), " found");
      check_value_size(out.size() + (first ? 0 : s.size()) + item.as_string().size(), "a join");
      if (!first) out += s;
      first = false;
      out += item.as_string();
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(py_str_format(s, args));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    ArgBinder a(fn, args, {"sub", "start", "end"});
    const int64_t r = find_cp(s, str_arg(a.get(0), fn), a.get_or(1, Value::none()), a.get_or(2, Value::none()),
                              name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) eval_fail("ValueError: substring not found");
    return Value(r);
  }
  if (name == "count") {
    ArgBinder a(fn, args, {"sub", "start", "end"});
    const std::u32string u = unicode::decode(s);
    const std::u32string x = unicode::decode(str_arg(a.get(0), fn));
    size_t b, e;
    clamp_range(a.get_or(1, Value::none()), a.get_or(2, Value::none()), u.size(), &b, &e);
    if (b > e) return Value(int64_t(0));
    if (x.empty()) return Value(int64_t(e - b + 1));
    int64_t n = 0;
    for (size_t i = b; i + x.size() <= e;) {
      if (std::u32string_view(u).substr(i, x.size()) == x) {
        ++n;
        i += x.size();
      } else {
        ++i;
      }
    }
    return Value(n);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgBinder a(fn, args, {"affix"});
    const std::string x = str_arg(a.get(0), fn);
    if (name == "removeprefix") return Value(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    if (x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value(s.substr(0, s.size() - x.size()));
    return Value(s);
  }
  if (name == "partition" || name == "rpartition") {
    ArgBinder a(fn, args, {"sep"});
    const std::string sep = str_arg(a.get(0), fn);
    if (sep.empty()) eval_fail("ValueError: empty separator");
    const size_t f = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos) {
      if (name == "partition") return Value::list({Value(s), Value(""), Value("")}, true);
      return Value::list({Value(""), Value(""), Value(s)}, true);
    }
    return Value::list({Value(s.substr(0, f)), Value(sep), Value(s.substr(f + sep.size()))}, true);
  }
  if (name == "splitlines") {
    ArgBinder a(fn, args, {"keepends"});
    if (a.has(0) && a.get(0).truthy()) unsupported("str.splitlines(keepends=True)");
    return string_list(py_splitlines(s));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ArgBinder a(fn, args, {"width", "fillchar"});
    const int64_t width = arg_int(a.get(0), fn);
    return Value(pad(s, width, fill_arg(a, 1, fn), name == "ljust" ? -1 : name == "rjust" ? 1 : 0));
  }
  if (name == "zfill") {
    ArgBinder a(fn, args, {"width"});
    const int64_t width = arg_int(a.get(0), fn);
    const int64_t len = int64_t(unicode::length(s));
    if (width <= len) return Value(s);
    check_value_size(size_t(width - len) + s.size(), "a zero-padded string");
    const std::string zeros(size_t(width - len), '0');
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) return Value(s.substr(0, 1) + zeros + s.substr(1));
    return Value(zeros + s);
  }
  if (name.rfind("is", 0) == 0) {
    ArgBinder a(fn, args, {});
    if (name == "isalnum") return all_chars(s, unicode::is_alnum);
    if (name == "isalpha") return all_chars(s, unicode::is_alpha);
    if (name == "isdecimal") return all_chars(s, unicode::is_decimal);
    if (name == "isdigit") return all_chars(s, unicode::is_digit);
    if (name == "isnumeric") return all_chars(s, unicode::is_numeric);
    if (name == "isspace") return all_chars(s, unicode::is_space);
    if (name == "isascii") return Value(unicode::is_ascii(s));
    if (name == "isprintable") {
      const std::u32string u = unicode::decode(s);
      return Value(std::all_of(u.begin(), u.end(), unicode::is_printable));
    }
    if (name == "islower" || name == "isupper") {
      bool cased = false;
      for (char32_t c : unicode::decode(s)) {
        if (name == "islower" ? unicode::is_upper(c) : unicode::is_lower(c)) return Value(false);
        if (name == "islower" ? unicode::is_lower(c) : unicode::is_upper(c)) cased = true;
        else if (unicode::is_cased(c)) return Value(false);
      }
      return Value(cased);
    }
  }
  unsupported("the str method '", name, "'");
}

Value call_list_method(const Value& list, const std::string& name, CallArgs& args) {
  const std::string fn = list.type_name() + "." + name;
  if (name == "copy") {
    ArgBinder a(fn, args, {});
    return Value::list(list.items());
  }
  if (name == "count") {
    ArgBinder a(fn, args, {"value"});
    return Value(int64_t(std::count_if(list.items().begin(), list.items().end(),
                                       [&](const Value& v) { return values_equal(v, a.get(0)); })));
  }
  if (name == "index") {
    ArgBinder a(fn, args, {"value", "start", "stop"});
    const auto& items = list.items();
    size_t b = 0, e = items.size();
    if (a.has(1) || a.has(2)) clamp_range(a.get_or(1, Value::none()), a.get_or(2, Value::none()), items.size(), &b, &e);
    for (size_t i = b; i < e; ++i)
      if (values_equal(items[i], a.get(0))) return Value(int64_t(i));
    eval_fail("ValueError: ", py_repr(a.get(0)), " is not in list");
  }
  unsupported("the ", list.type_name(), " method '", name, "'");
}

Value call_dict_method(const Value& dict, const std::string& name, CallArgs& args) {
  const Dict& d = dict.as_dict();
  const std::string fn = "dict." + name;
  if (name == "get") {
    ArgBinder a(fn, args, {"key", "default"});
    const Value& key = a.get(0);
    if (!value_hashable(key)) eval_fail("unhashable type: '", key.type_name(), "'");
    if (const Value* v = d.find(key)) return *v;
    return a.get_or(1, Value::none());
  }
  if (name == "items" || name == "keys" || name == "values") {
    ArgBinder a(fn, args, {});
    ValueList out;
    out.reserve(d.size());
    for (const auto& [k, v] : d.items()) {
      if (name == "items") out.push_back(Value::list({k, v}, true));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::sequence(std::move(out), name == "items"  ? SeqKind::DictItems
                                           : name == "keys" ? SeqKind::DictKeys
                                                            : SeqKind::DictValues);
  }
  if (name == "copy") {
    ArgBinder a(fn, args, {});
    return dict;
  }
  unsupported("the dict method '", name, "'");
}

}  // namespace

bool find_method(const Value& receiver, const std::string& name, Value* out) {
  const std::unordered_set<std::string>* known = nullptr;
  const std::unordered_set<std::string>* mutating = nullptr;
  if (receiver.is_string()) known = &str_methods();
  else if (receiver.is_list()) known = &list_methods(), mutating = &list_mutating();
  else if (receiver.is_dict()) known = &dict_methods(), mutating = &dict_mutating();
  if (!known || !known->count(name)) return false;
  if (receiver.is_list() && !receiver.is_plain_list()) {
    // tuples and views have only count/index (tuples) or nothing callable we model
    if (!(receiver.is_tuple() && (name == "count" || name == "index"))) return false;
  }
  if (mutating && mutating->count(name)) {
    *out = Value::undefined("access to attribute '" + name + "' of '" + receiver.type_name() + "' object is unsafe.");
    return true;
  }
  *out = Value::object(std::make_shared<BoundMethod>(receiver, name));
  return true;
}

namespace {

// markupsafe wraps these str methods: string arguments are escaped, string results stay Markup.
bool markup_wrapped(const std::string& name) {
  static const std::unordered_set<std::string> s = {
      "capitalize", "title", "lower", "upper", "replace", "ljust", "rjust", "lstrip", "rstrip", "center",
      "strip", "swapcase", "zfill", "removeprefix", "removesuffix", "split", "rsplit", "splitlines",
      "partition", "rpartition", "format", "join"};
  return s.count(name) > 0;
}

Value as_markup(const Value& v) {
  if (v.is_string()) return Value::markup(v.as_string());
  if (v.is_list()) {
    ValueList items;
    for (const auto& e : v.items()) items.push_back(as_markup(e));
    return Value::sequence(std::move(items), v.seq_kind());
  }
  return v;
}

}  // namespace

Value call_method(Interpreter&, const Value& receiver, const std::string& name, CallArgs& args) {
  if (receiver.is_markup() && markup_wrapped(name)) {
    CallArgs escaped = args;
    auto esc = [](Value& v) {
      if (v.is_string()) v = escape_value(v);
    };
    for (auto& v : escaped.positional) esc(v);
    for (auto& [k, v] : escaped.keywords) esc(v);
    if (name == "join" && !escaped.positional.empty()) {
      ValueList items;
      for (auto& e : iterate(escaped.positional[0])) items.push_back(escape_value(e));
      escaped.positional[0] = Value::list(std::move(items));
    }
    return as_markup(call_str_method(receiver.as_string(), name, escaped));
  }
  if (receiver.is_string()) return call_str_method(receiver.as_string(), name, args);
  if (receiver.is_list()) return call_list_method(receiver, name, args);
  if (receiver.is_dict()) return call_dict_method(receiver, name, args);
  eval_fail("'", receiver.type_name(), "' object has no attribute '", name, "'");
}

}  // namespace fathom::jinja
