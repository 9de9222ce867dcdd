// Jinja2's builtin filters with their Python behaviour (including which ones
// return one-shot generators), plus transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "text/jinja/budget.h"
#include "text/jinja/builtins.h"
#include "text/jinja/diagnostics.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace fathom::jinja {
namespace {

// soft_str: Markup stays Markup, everything else becomes str().
Value soft_str(const Value& v) { return v.is_string() ? v : Value(py_str(v)); }
Value like(const Value& source, std::string s) {
  return source.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

// make_attrgetter: "a.b.0" looks up each part with getitem; digit parts are ints.
std::vector<Value> attribute_parts(const Value& attribute) {
  if (attribute.is_none()) return {};
  if (!attribute.is_string()) return {attribute};
  std::vector<Value> parts;
  const std::string& s = attribute.as_string();
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const std::u32string u = unicode::decode(part);
    const bool digits = !u.empty() && std::all_of(u.begin(), u.end(), unicode::is_digit);
    if (digits && unicode::is_ascii(part)) parts.push_back(Value(int64_t(std::stoll(part))));
    else if (digits) unsupported("non-ASCII digits in an attribute path");
    else parts.push_back(Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

Value lookup_path(Value item, const std::vector<Value>& parts, const Value* default_value = nullptr) {
  for (const auto& part : parts) {
    item = get_item(item, part);
    if (default_value && !default_value->is_none() && item.is_undefined()) item = *default_value;
  }
  return item;
}

Value ignore_case(const Value& v) {
  if (v.is_string()) return like(v, unicode::lower(v.as_string()));
  return v;
}

bool truthy_arg(const ArgBinder& a, size_t i, bool fallback) { return a.has(i) ? a.get(i).truthy() : fallback; }

// ---- filters ----

Value f_abs(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("abs", args, {});
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) unsupported("integer arithmetic beyond 64 bits");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is_bool()) return Value(int64_t(v.as_bool()));
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_undefined()) fail_undefined(v);
  eval_fail("bad operand type for abs(): '", v.type_name(), "'");
}

Value f_attr(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("attr", args, {"name"});
  if (!a.get(0).is_string()) eval_fail("attribute name must be string");
  const std::string& name = a.get(0).as_string();
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_string() || v.is_list() || v.is_dict()) {
    Value method;
    if (!name.empty() && name[0] != '_' && find_method(v, name, &method)) return method;
    return Value::undefined("'" + v.type_name() + " object' has no attribute '" + name + "'");
  }
  return get_attr(v, name);
}

Value f_batch(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("batch", args, {"linecount", "fill_with"});
  const int64_t n = arg_int(a.get(0), "batch");
  const Value fill = a.get_or(1, Value::none());
  if (!fill.is_none() && n > 0) check_value_size(size_t(n) * sizeof(Value), "a batch filled to its linecount");
  ValueList out, tmp;
  for (auto& item : iterate(v)) {
    if (int64_t(tmp.size()) == n) {
      out.push_back(Value::list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(std::move(item));
  }
  if (!tmp.empty()) {
    if (!fill.is_none())
      while (int64_t(tmp.size()) < n) tmp.push_back(fill);
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::generator(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("capitalize", args, {});
  const Value s = soft_str(v);
  return like(s, unicode::capitalize(s.as_string()));
}

Value f_center(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a("center", args, {"width"});
  CallArgs margs;
  margs.positional.push_back(a.get_or(0, Value(int64_t(80))));
  const Value s = soft_str(v);
  return call_method(in, s, "center", margs);
}

Value f_length(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("length", args, {});
  return Value(int64_t(py_len(v)));
}

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("default", args, {"default_value", "boolean"});
  if (v.is_undefined() || (truthy_arg(a, 1, false) && !v.truthy())) return a.get_or(0, Value(""));
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("dictsort", args, {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = truthy_arg(a, 0, false);
  const Value by = a.get_or(1, Value("key"));
  const bool reverse = truthy_arg(a, 2, false);
  int pos;
  if (by.is_string() && by.as_string() == "key") pos = 0;
  else if (by.is_string() && by.as_string() == "value") pos = 1;
  else eval_fail("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) {
    if (v.is_undefined()) fail_undefined(v);
    eval_fail("'", v.type_name(), "' object has no attribute 'items'");
  }
  std::vector<std::pair<Value, Value>> entries;  // (sort key, item)
  for (const auto& [k, val] : v.as_dict().items()) {
    const Value& key = pos == 0 ? k : val;
    entries.emplace_back(case_sensitive ? key : ignore_case(key), Value::list({k, val}, true));
  }
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    return reverse ? value_less(y.first, x.first) : value_less(x.first, y.first);
  });
  ValueList out;
  for (auto& e : entries) out.push_back(std::move(e.second));
  return Value::list(std::move(out));
}

Value f_escape(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("escape", args, {});
  return escape_value(v);
}

Value f_forceescape(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("forceescape", args, {});
  return Value::markup(html_escape(py_str(v)));
}

Value f_first(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("first", args, {});
  if (v.is_generator()) {
    GeneratorData& g = v.generator_data();
    if (g.position < g.items.size()) return g.items[g.position++];
    return Value::undefined("No first item, sequence was empty.");
  }
  if (v.is_list() && !v.items().empty()) return v.items().front();
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("last", args, {});
  if (v.is_generator()) eval_fail("'generator' object is not reversible");
  if (v.is_list() && !v.items().empty()) return v.items().back();
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

// Python float() of a string: optional sign, digits with single underscores, inf/nan.
bool parse_py_float(std::string_view text, double* out) {
  std::string s = py_strip(text, Value::none(), true, true);
  std::string lower = unicode::lower(s);
  std::string body = lower;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double x = body == "nan" ? std::nan("") : INFINITY;
    *out = lower[0] == '-' ? -x : x;
    return true;
  }
  std::string clean;
  size_t i = 0;
  bool digits = false, prev_digit = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      clean += c;
      digits = prev_digit = true;
    } else if (c == '_') {
      if (!prev_digit || i + 1 >= s.size() || !(s[i + 1] >= '0' && s[i + 1] <= '9')) return false;
      prev_digit = false;
    } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
      clean += c;
      prev_digit = false;
    } else {
      return false;
    }
  }
  if (!digits) return false;
  // shape check: digits[.digits][e[+-]digits] or .digits...
  size_t p = 0;
  if (p < clean.size() && (clean[p] == '+' || clean[p] == '-')) ++p;
  size_t int_digits = 0, frac_digits = 0;
  while (p < clean.size() && std::isdigit(static_cast<unsigned char>(clean[p]))) ++p, ++int_digits;
  if (p < clean.size() && clean[p] == '.') {
    ++p;
    while (p < clean.size() && std::isdigit(static_cast<unsigned char>(clean[p]))) ++p, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return false;
  if (p < clean.size() && (clean[p] == 'e' || clean[p] == 'E')) {
    ++p;
    if (p < clean.size() && (clean[p] == '+' || clean[p] == '-')) ++p;
    size_t exp_digits = 0;
    while (p < clean.size() && std::isdigit(static_cast<unsigned char>(clean[p]))) ++p, ++exp_digits;
    if (!exp_digits) return false;
  }
  if (p != clean.size()) return false;
  *out = std::strtod(clean.c_str(), nullptr);
  return true;
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("float", args, {"default"});
  const Value fallback = a.get_or(0, Value(0.0));
  if (v.is_float()) return v;
  if (v.is_int() || v.is_bool()) return Value(v.number_as_double());
  if (v.is_string()) {
    double d;
    if (parse_py_float(v.as_string(), &d)) return Value(d);
    return fallback;
  }
  if (v.is_undefined()) fail_undefined(v);
  return fallback;
}

Value f_format(Interpreter&, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keywords.empty())
    eval_fail("can't handle positional and keyword arguments at the same time");
  Value params;
  if (!args.keywords.empty()) {
    Dict d;
    for (const auto& [k, val] : args.keywords) d.set(Value(k), val);
    params = Value::dict(std::move(d));
  } else {
    params = Value::list(args.positional, true);
  }
  return binary_op(BinaryOp::Mod, soft_str(v), params);
}

Value f_indent(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("indent", args, {"width", "first", "blank"});
  const Value width = a.get_or(0, Value(int64_t(4)));
  const bool first = truthy_arg(a, 1, false);
  const bool blank = truthy_arg(a, 2, false);
  std::string indention;
  if (width.is_string()) {
    indention = width.as_string();
  } else {
    const int64_t n = std::max<int64_t>(0, arg_int(width, "indent"));
    check_value_size(size_t(n), "an indentation");
    indention = std::string(size_t(n), ' ');
  }
  if (!v.is_string()) {
    if (v.is_undefined()) fail_undefined(v);
    eval_fail("unsupported operand type(s) for +=: '", v.type_name(), "' and 'str'");
  }
  const std::vector<std::string> lines = py_splitlines(v.as_string() + "\n");
  size_t total;
  if (__builtin_mul_overflow(lines.size() + 1, indention.size(), &total)) total = SIZE_MAX;
  check_value_size(v.as_string().size() + total, "an indented string");
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? lines[i] : indention + lines[i]);
  }
  if (first) rv = indention + rv;
  return like(v, std::move(rv));
}

// Python int(str, base)
bool parse_py_int(std::string_view text, int64_t base, int64_t* out) {
  std::string s = py_strip(text, Value::none(), true, true);
  bool negative = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    const char k = char(std::tolower(static_cast<unsigned char>(s[i + 1])));
    const int64_t prefix_base = k == 'x' ? 16 : k == 'o' ? 8 : k == 'b' ? 2 : 0;
    if (prefix_base && (base == prefix_base || base == 0)) {
      base = prefix_base;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36) return false;
  uint64_t value = 0;
  bool any = false, prev_digit = false;
  for (; i < s.size(); ++i) {
    const char c = char(std::tolower(static_cast<unsigned char>(s[i])));
    if (c == '_') {
      if (!prev_digit || i + 1 >= s.size()) return false;
      prev_digit = false;
      continue;
    }
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
    else return false;
    if (d >= base) return false;
    if (value > (uint64_t(INT64_MAX) + 1 - uint64_t(d)) / uint64_t(base))
      unsupported("integers beyond 64 bits");
    value = value * uint64_t(base) + uint64_t(d);
    any = prev_digit = true;
  }
  if (!any || !prev_digit) return false;
  if (!negative && value > uint64_t(INT64_MAX)) unsupported("integers beyond 64 bits");
  *out = negative ? int64_t(0 - value) : int64_t(value);
  return true;
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("int", args, {"default", "base"});
  const Value fallback = a.get_or(0, Value(int64_t(0)));
  const int64_t base = a.has(1) ? arg_int(a.get(1), "int") : 10;
  if (v.is_int()) return v;
  if (v.is_bool()) return Value(int64_t(v.as_bool()));
  auto from_double = [&](double d) -> Value {
    if (std::isnan(d) || std::isinf(d)) eval_fail("cannot convert float ", py_float_repr(d), " to integer");
    if (std::fabs(d) >= 9.2e18) unsupported("integers beyond 64 bits");
    return Value(int64_t(std::trunc(d)));
  };
  if (v.is_float()) return from_double(v.as_float());
  if (v.is_string()) {
    int64_t i;
    if (parse_py_int(v.as_string(), base, &i)) return Value(i);
    double d;
    if (parse_py_float(v.as_string(), &d)) {
      if (std::isnan(d) || std::isinf(d)) return fallback;
      return from_double(d);
    }
    return fallback;
  }
  if (v.is_undefined()) fail_undefined(v);
  return fallback;
}

Value f_items(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("items", args, {});
  if (v.is_undefined()) return Value::generator({});
  if (!v.is_dict()) eval_fail("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, val] : v.as_dict().items()) out.push_back(Value::list({k, val}, true));
  return Value::generator(std::move(out));
}

Value f_join(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("join", args, {"d", "attribute"});
  const std::string sep = py_str(a.get_or(0, Value("")));
  const std::vector<Value> parts = attribute_parts(a.get_or(1, Value::none()));
  std::string out;
  bool first = true;
  for (const auto& item : iterate(v)) {
    const std::string piece = py_str(parts.empty() ? item : lookup_path(item, parts));
    check_value_size(out.size() + (first ? 0 : sep.size()) + piece.size(), "a join");
    if (!first) out += sep;
    first = false;
    out += piece;
  }
  return Value(std::move(out));
}

Value f_list(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("list", args, {});
  return Value::list(iterate(v));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("lower", args, {});
  const Value s = soft_str(v);
  return like(s, unicode::lower(s.as_string()));
}

Value f_upper(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("upper", args, {});
  const Value s = soft_str(v);
  return like(s, unicode::upper(s.as_string()));
}

Value call_filter_by_name(Interpreter& in, const Value& name, const Value& item, CallArgs args) {
  if (!name.is_string()) eval_fail("filter name must be a string");
  BuiltinLookup status;
  FilterFn fn = find_filter(name.as_string(), &status);
  if (status == BuiltinLookup::Unsupported) unsupported("the Jinja2 filter '", name.as_string(), "'");
  if (!fn) eval_fail("No filter named '", name.as_string(), "'.");
  return fn(in, item, args);
}

bool call_test_by_name(Interpreter& in, const Value& name, const Value& item, CallArgs args) {
  if (!name.is_string()) eval_fail("test name must be a string");
  BuiltinLookup status;
  TestFn fn = find_test(name.as_string(), &status);
  if (status == BuiltinLookup::Unsupported) unsupported("the Jinja2 test '", name.as_string(), "'");
  if (!fn) eval_fail("No test named '", name.as_string(), "'.");
  return fn(in, item, args);
}

Value f_map(Interpreter& in, const Value& v, CallArgs& args) {
  if (!v.truthy()) return Value::generator({});
  ValueList out;
  if (args.positional.empty() && !args.keywords.empty() &&
      std::any_of(args.keywords.begin(), args.keywords.end(), [](const auto& k) { return k.first == "attribute"; })) {
    Value attribute, fallback = Value::none();
    for (const auto& [k, val] : args.keywords) {
      if (k == "attribute") attribute = val;
      else if (k == "default") fallback = val;
      else eval_fail("Unexpected keyword argument '", k, "'");
    }
    const std::vector<Value> parts = attribute_parts(attribute);
    for (const auto& item : iterate(v)) out.push_back(lookup_path(item, parts, &fallback));
    return Value::generator(std::move(out));
  }
  if (args.positional.empty()) eval_fail("map requires a filter argument");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keywords = args.keywords;
  for (const auto& item : iterate(v)) out.push_back(call_filter_by_name(in, args.positional[0], item, rest));
  return Value::generator(std::move(out));
}

Value min_or_max(Interpreter&, const Value& v, CallArgs& args, bool want_max) {
  ArgBinder a(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = truthy_arg(a, 0, false);
  const std::vector<Value> parts = attribute_parts(a.get_or(1, Value::none()));
  const ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& item) {
    Value k = parts.empty() ? item : lookup_path(item, parts);
    return case_sensitive ? k : ignore_case(k);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? value_less(best_key, k) : value_less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}
Value f_max(Interpreter& in, const Value& v, CallArgs& args) { return min_or_max(in, v, args, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& args) { return min_or_max(in, v, args, false); }

Value select_or_reject(Interpreter& in, const Value& v, CallArgs& args, bool select, bool lookup_attr) {
  if (!v.truthy()) return Value::generator({});
  size_t off = 0;
  std::vector<Value> parts;
  if (lookup_attr) {
    if (args.positional.empty()) eval_fail("Missing parameter for attribute name");
    parts = attribute_parts(args.positional[0]);
    off = 1;
  }
  const bool has_test = args.positional.size() > off;
  CallArgs test_args;
  if (has_test) test_args.positional.assign(args.positional.begin() + ptrdiff_t(off) + 1, args.positional.end());
  test_args.keywords = args.keywords;
  ValueList out;
  for (const auto& item : iterate(v)) {
    const Value subject = lookup_attr ? lookup_path(item, parts) : item;
    const bool ok = has_test ? call_test_by_name(in, args.positional[off], subject, test_args) : subject.truthy();
    if (ok == select) out.push_back(item);
  }
  return Value::generator(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, false); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_or_reject(in, v, a, false, true); }

Value f_replace(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a("replace", args, {"old", "new", "count"});
  CallArgs margs;
  margs.positional = {Value(py_str(a.get(0))), Value(py_str(a.get(1)))};
  if (a.has(2) && !a.get(2).is_none()) margs.positional.push_back(a.get(2));
  return call_method(in, Value(py_str(v)), "replace", margs);
}

Value f_reverse(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("reverse", args, {});
  if (v.is_string()) {
    std::u32string u = unicode::decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return like(v, unicode::encode(u));
  }
  if (v.is_generator()) {  // not reversible: Jinja falls back to a reversed list
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (v.is_list() || v.is_dict() || v.is_undefined()) {
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::generator(std::move(items));  // reversed() returns an iterator
  }
  eval_fail("argument must be iterable");
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("round", args, {"precision", "method"});
  const int64_t precision = a.has(0) ? arg_int(a.get(0), "round") : 0;
  const Value method = a.get_or(1, Value("common"));
  if (!method.is_string() ||
      (method.as_string() != "common" && method.as_string() != "ceil" && method.as_string() != "floor"))
    eval_fail("method must be common, ceil or floor");
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) eval_fail("type ", v.type_name(), " doesn't define __round__ method");
  if (precision < 0 || precision > 300) unsupported("round() with precision ", precision);
  if (method.as_string() == "common") {
    if (!v.is_float()) return Value(v.is_bool() ? int64_t(v.as_bool()) : v.as_int());  // round(int, n) is an int
    const double d = v.as_float();
    if (std::isnan(d) || std::isinf(d)) return v;
    // Python rounds the exact binary value half-to-even, as printf does.
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", int(precision), d);
    return Value(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, double(precision));
  const double x = v.number_as_double() * scale;
  return Value((method.as_string() == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("safe", args, {});
  return v.is_markup() ? v : Value::markup(py_str(v));
}

Value f_slice(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("slice", args, {"slices", "fill_with"});
  const int64_t slices = arg_int(a.get(0), "slice");
  const Value fill = a.get_or(1, Value::none());
  const ValueList seq = iterate(v);
  if (slices <= 0) eval_fail("integer division or modulo by zero");
  check_value_size(size_t(slices) * sizeof(Value), "a slice filter's list of slices");
  const int64_t length = int64_t(seq.size());
  const int64_t per = length / slices, extra = length % slices;
  int64_t offset = 0;
  ValueList out;
  for (int64_t n = 0; n < slices; ++n) {
    const int64_t start = offset + n * per;
    if (n < extra) ++offset;
    const int64_t end = offset + (n + 1) * per;
    ValueList tmp(seq.begin() + start, seq.begin() + end);
    if (!fill.is_none() && n >= extra) tmp.push_back(fill);
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::generator(std::move(out));
}

Value f_sort(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("sort", args, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = truthy_arg(a, 0, false);
  const bool case_sensitive = truthy_arg(a, 1, false);
  const Value attribute = a.get_or(2, Value::none());
  std::vector<std::vector<Value>> paths;
  if (attribute.is_string()) {
    const std::string& s = attribute.as_string();
    size_t start = 0;
    while (true) {
      const size_t comma = s.find(',', start);
      paths.push_back(attribute_parts(Value(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start))));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    paths.push_back(attribute_parts(attribute));
  }
  ValueList items = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items) {
    ValueList key;
    for (const auto& p : paths) {
      Value k = p.empty() ? item : lookup_path(item, p);
      key.push_back(case_sensitive ? k : ignore_case(k));
    }
    keyed.emplace_back(Value::list(std::move(key)), std::move(item));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? value_less(y.first, x.first) : value_less(x.first, y.first);
  });
  ValueList out;
  for (auto& k : keyed) out.push_back(std::move(k.second));
  return Value::list(std::move(out));
}

Value f_string(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("string", args, {});
  return soft_str(v);
}

Value f_sum(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("sum", args, {"attribute", "start"});
  const std::vector<Value> parts = attribute_parts(a.get_or(0, Value::none()));
  Value total = a.get_or(1, Value(int64_t(0)));
  if (total.is_string()) eval_fail("sum() can't sum strings [use ''.join(seq) instead]");
  for (const auto& item : iterate(v)) total = binary_op(BinaryOp::Add, total, parts.empty() ? item : lookup_path(item, parts));
  return total;
}

Value f_title(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("title", args, {});
  // Jinja splits on runs of [-\s({\[<] (kept) and upper-cases the first char of every piece.
  const std::u32string u = unicode::decode(py_str(v));
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    const bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    const std::u32string_view piece = std::u32string_view(u).substr(i, j - i);
    out += unicode::upper(unicode::encode(piece.substr(0, 1)));
    out += unicode::lower(unicode::encode(piece.substr(1)));
    i = j;
  }
  return Value(std::move(out));
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& args) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  ArgBinder a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions opt;
  opt.ensure_ascii = truthy_arg(a, 0, false);
  const Value indent = a.get_or(1, Value::none());
  if (indent.is_string()) opt.indent = indent.as_string();
  else if (!indent.is_none()) {
    const int64_t n = std::max<int64_t>(0, arg_int(indent, "tojson indent"));
    check_value_size(size_t(n), "a tojson indent");
    opt.indent = std::string(size_t(n), ' ');
  }
  const Value separators = a.get_or(2, Value::none());
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.items().size() != 2 || !separators.items()[0].is_string() ||
        !separators.items()[1].is_string())
      eval_fail("tojson separators must be a pair of strings");
    opt.item_separator = separators.items()[0].as_string();
    opt.key_separator = separators.items()[1].as_string();
  }
  opt.sort_keys = truthy_arg(a, 3, false);
  if (v.is_undefined()) eval_fail("Object of type Undefined is not JSON serializable");
  return Value(json_dumps(v, opt));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("trim", args, {"chars"});
  const Value s = soft_str(v);
  return like(s, py_strip(s.as_string(), a.get_or(0, Value::none()), true, true));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("truncate", args, {"length", "killwords", "end", "leeway"});
  const int64_t length = a.has(0) ? arg_int(a.get(0), "truncate") : 255;
  const bool killwords = truthy_arg(a, 1, false);
  const std::string end = a.has(2) ? py_str(a.get(2)) : "...";
  const int64_t leeway = a.has(3) && !a.get(3).is_none() ? arg_int(a.get(3), "truncate") : 5;
  const int64_t end_len = int64_t(unicode::length(end));
  if (length < end_len) eval_fail("AssertionError: expected length >= ", end_len, ", got ", length);
  if (int64_t(py_len(v)) <= length + leeway) return v;
  if (!v.is_string()) unsupported("truncate of a long '", v.type_name(), "'");
  const std::u32string u = unicode::decode(v.as_string());
  const std::u32string head = u.substr(0, size_t(length - end_len));
  if (killwords) return Value(unicode::encode(head) + end);
  const size_t sp = head.rfind(U' ');
  return Value(unicode::encode(sp == std::u32string::npos ? head : head.substr(0, sp)) + end);
}

Value f_unique(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("unique", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = truthy_arg(a, 0, false);
  const std::vector<Value> parts = attribute_parts(a.get_or(1, Value::none()));
  ValueList out, seen;
  for (const auto& item : iterate(v)) {
    Value key = parts.empty() ? item : lookup_path(item, parts);
    if (!case_sensitive) key = ignore_case(key);
    if (!value_hashable(key)) eval_fail("unhashable type: '", key.type_name(), "'");
    charge_steps(seen.size());  // quadratic: the budget must see it
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::generator(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("wordcount", args, {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : unicode::decode(py_str(v))) {
    const bool w = c == '_' || unicode::is_alnum(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

const std::unordered_map<std::string_view, FilterFn>& filters() {
  static const std::unordered_map<std::string_view, FilterFn> m = {
      {"abs", f_abs},         {"attr", f_attr},         {"batch", f_batch},       {"capitalize", f_capitalize},
      {"center", f_center},   {"count", f_length},      {"d", f_default},         {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape},        {"escape", f_escape},     {"first", f_first},
      {"float", f_float},     {"forceescape", f_forceescape}, {"format", f_format}, {"indent", f_indent},
      {"int", f_int},         {"items", f_items},       {"join", f_join},         {"last", f_last},
      {"length", f_length},   {"list", f_list},         {"lower", f_lower},       {"map", f_map},
      {"max", f_max},         {"min", f_min},           {"reject", f_reject},     {"rejectattr", f_rejectattr},
      {"replace", f_replace}, {"reverse", f_reverse},   {"round", f_round},       {"safe", f_safe},
      {"select", f_select},   {"selectattr", f_selectattr}, {"slice", f_slice},   {"sort", f_sort},
      {"string", f_string},   {"sum", f_sum},           {"title", f_title},       {"tojson", f_tojson},
      {"trim", f_trim},       {"truncate", f_truncate}, {"unique", f_unique},     {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return m;
}

}  // namespace

FilterFn find_filter(std::string_view name, BuiltinLookup* status) {
  static const std::unordered_set<std::string_view> not_implemented = {
      "filesizeformat", "groupby", "pprint", "random", "striptags", "urlencode", "urlize", "wordwrap", "xmlattr"};
  auto it = filters().find(name);
  if (it != filters().end()) {
    *status = BuiltinLookup::Found;
    return it->second;
  }
  *status = not_implemented.count(name) ? BuiltinLookup::Unsupported : BuiltinLookup::Unknown;
  return nullptr;
}

}  // namespace fathom::jinja
