// Python semantics of operators, attribute/item access, iteration and calls,
// as Jinja2's ImmutableSandboxedEnvironment applies them.
#include <algorithm>
#include <cmath>
#include <optional>

#include "text/jinja/budget.h"
#include "text/jinja/builtins.h"
#include "text/jinja/diagnostics.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace fathom::jinja {
namespace {

bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t intlike(const Value& v) { return v.is_bool() ? int64_t(v.as_bool()) : v.as_int(); }

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::FloorDiv: return "//";
    case BinaryOp::Mod: return "%";
    case BinaryOp::Pow: return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported_operands(BinaryOp op, const Value& a, const Value& b) {
  eval_fail("unsupported operand type(s) for ", op_symbol(op), ": '", a.type_name(), "' and '", b.type_name(), "'");
}

void check_overflow(bool overflow) {
  if (overflow) unsupported("integer arithmetic beyond 64 bits (Python integers are unbounded)");
}

// Python's float floor division and modulo (float_divmod).
std::pair<double, double> float_divmod(double vx, double wx) {
  if (wx == 0.0) eval_fail("ZeroDivisionError: float divmod()");
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return {floordiv, mod};
}

// What a list costs to build or copy: its Values and the strings they hold by value.
size_t list_bytes(const ValueList& items) {
  size_t bytes = items.size() * sizeof(Value);
  for (const auto& v : items)
    if (v.is_string()) bytes += v.as_string().size();
  return bytes;
}

// Checks n copies of `unit` bytes against the value-size limit before anything is allocated.
void check_repeat_size(size_t unit, int64_t n, std::string_view what) {
  if (n <= 0 || unit == 0) return;
  size_t total;
  if (__builtin_mul_overflow(unit, size_t(n), &total)) total = SIZE_MAX;
  check_value_size(total, what);
}

Value repeat_sequence(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    check_repeat_size(seq.as_string().size(), n, "a string repetition (*)");
    std::string out;
    if (n > 0) out.reserve(seq.as_string().size() * size_t(n));
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return seq.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  check_repeat_size(list_bytes(seq.items()), n, "a list repetition (*)");
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.is_tuple());
}

bool is_concat_sequence(const Value& v) { return v.is_plain_list() || v.is_tuple(); }

std::string object_type_repr(const Value& obj) {
  if (obj.is_none()) return "None";
  return obj.type_name() + " object";
}

Value missing_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

Value missing_element(const Value& obj, const Value& key) {
  return Value::undefined(object_type_repr(obj) + " has no element " + py_repr(key));
}

int64_t normalize_index(int64_t i, size_t n, bool* ok) {
  if (i < 0) i += int64_t(n);
  *ok = i >= 0 && i < int64_t(n);
  return i;
}

const std::vector<std::string_view>& numeric_attributes() {
  static const std::vector<std::string_view> names = {"real", "imag", "numerator", "denominator", "conjugate",
                                                      "bit_length", "bit_count", "to_bytes", "as_integer_ratio",
                                                      "is_integer", "hex"};
  return names;
}

}  // namespace

[[noreturn]] void fail_undefined(const Value& v) { throw EvalError(v.undefined_hint()); }

Value binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = is_intlike(a) && is_intlike(b);
  switch (op) {
    case BinaryOp::Add:
      if (ints) {
        int64_t r;
        check_overflow(__builtin_add_overflow(intlike(a), intlike(b), &r));
        return Value(r);
      }
      if (numbers) return Value(a.number_as_double() + b.number_as_double());
      if (a.is_string() && b.is_string()) {
        check_value_size(a.as_string().size() + b.as_string().size(), "a string concatenation (+)");
        if (a.is_markup() || b.is_markup())  // Markup escapes the plain str it is added to
          return Value::markup(escape_value(a).as_string() + escape_value(b).as_string());
        return Value(a.as_string() + b.as_string());
      }
      if (is_concat_sequence(a) && is_concat_sequence(b) && a.is_tuple() == b.is_tuple()) {
        check_value_size(list_bytes(a.items()) + list_bytes(b.items()), "a list concatenation (+)");
        ValueList out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(out), a.is_tuple());
      }
      if (a.is_string()) eval_fail("can only concatenate str (not \"", b.type_name(), "\") to str");
      if (a.is_plain_list()) eval_fail("can only concatenate list (not \"", b.type_name(), "\") to list");
      unsupported_operands(op, a, b);
    case BinaryOp::Sub:
      if (ints) {
        int64_t r;
        check_overflow(__builtin_sub_overflow(intlike(a), intlike(b), &r));
        return Value(r);
      }
      if (numbers) return Value(a.number_as_double() - b.number_as_double());
      unsupported_operands(op, a, b);
    case BinaryOp::Mul:
      if (ints) {
        int64_t r;
        check_overflow(__builtin_mul_overflow(intlike(a), intlike(b), &r));
        return Value(r);
      }
      if (numbers) return Value(a.number_as_double() * b.number_as_double());
      if ((a.is_string() || is_concat_sequence(a)) && is_intlike(b)) return repeat_sequence(a, intlike(b));
      if ((b.is_string() || is_concat_sequence(b)) && is_intlike(a)) return repeat_sequence(b, intlike(a));
      if ((a.is_string() || a.is_list()) && b.is_number())
        eval_fail("can't multiply sequence by non-int of type '", b.type_name(), "'");
      unsupported_operands(op, a, b);
    case BinaryOp::Div:
      if (numbers) {
        if (b.number_as_double() == 0.0) eval_fail("ZeroDivisionError: division by zero");
        return Value(a.number_as_double() / b.number_as_double());
      }
      unsupported_operands(op, a, b);
    case BinaryOp::FloorDiv:
      if (ints) {
        const int64_t x = intlike(a), y = intlike(b);
        if (y == 0) eval_fail("ZeroDivisionError: integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) unsupported("integer arithmetic beyond 64 bits");
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value(q);
      }
      if (numbers) {
        if (b.number_as_double() == 0.0) eval_fail("ZeroDivisionError: float floor division by zero");
        return Value(float_divmod(a.number_as_double(), b.number_as_double()).first);
      }
      unsupported_operands(op, a, b);
    case BinaryOp::Mod:
      if (a.is_markup()) {  // Markup % args escapes the string arguments
        auto esc = [](const Value& v) { return v.is_string() ? escape_value(v) : v; };
        Value escaped = b;
        if (b.is_tuple()) {
          ValueList items;
          for (const auto& e : b.items()) items.push_back(esc(e));
          escaped = Value::list(std::move(items), true);
        } else if (b.is_dict()) {
          Dict d;
          for (const auto& [k, v] : b.as_dict().items()) d.set(k, esc(v));
          escaped = Value::dict(std::move(d));
        } else {
          escaped = esc(b);
        }
        return Value::markup(py_percent_format(a.as_string(), escaped));
      }
      if (a.is_string()) return Value(py_percent_format(a.as_string(), b));
      if (ints) {
        const int64_t x = intlike(a), y = intlike(b);
        if (y == 0) eval_fail("ZeroDivisionError: integer division or modulo by zero");
        if (y == -1) return Value(int64_t(0));
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value(r);
      }
      if (numbers) {
        if (b.number_as_double() == 0.0) eval_fail("ZeroDivisionError: float modulo");
        return Value(float_divmod(a.number_as_double(), b.number_as_double()).second);
      }
      unsupported_operands(op, a, b);
    case BinaryOp::Pow:
      if (ints && intlike(b) >= 0) {
        int64_t base = intlike(a), exp = intlike(b), result = 1;
        while (exp > 0) {
          if (exp & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
          exp >>= 1;
          if (exp) check_overflow(__builtin_mul_overflow(base, base, &base));
        }
        return Value(result);
      }
      if (numbers) {
        const double x = a.number_as_double(), y = b.number_as_double();
        if (x == 0.0 && y < 0) eval_fail("ZeroDivisionError: 0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) unsupported("a negative number raised to a fractional power (complex result)");
        return Value(std::pow(x, y));
      }
      unsupported_operands(op, a, b);
  }
  unsupported_operands(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (is_intlike(v)) {
    if (intlike(v) == INT64_MIN) unsupported("integer arithmetic beyond 64 bits");
    return Value(-intlike(v));
  }
  if (v.is_float()) return Value(-v.as_float());
  eval_fail("bad operand type for unary -: '", v.type_name(), "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (is_intlike(v)) return Value(intlike(v));
  if (v.is_float()) return v;
  eval_fail("bad operand type for unary +: '", v.type_name(), "'");
}

bool value_less(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return intlike(a) < intlike(b);
    return a.number_as_double() < b.number_as_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind() &&
      (a.is_plain_list() || a.is_tuple())) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return value_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  eval_fail("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string())
        eval_fail("'in <string>' requires string as left operand, not ", item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const auto& e : container.items())
        if (values_equal(e, item)) return true;
      return false;
    case Value::Kind::Dict:
      if (!value_hashable(item)) eval_fail("unhashable type: '", item.type_name(), "'");
      return container.as_dict().contains(item);
    case Value::Kind::Generator: {  // consumes up to and including the match
      GeneratorData& g = container.generator_data();
      while (g.position < g.items.size())
        if (values_equal(g.items[g.position++], item)) return true;
      return false;
    }
    default: eval_fail("argument of type '", container.type_name(), "' is not iterable");
  }
}

bool compare_values(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::Eq: return values_equal(a, b);
    case CompareOp::Ne: return !values_equal(a, b);
    case CompareOp::Lt: return value_less(a, b);
    case CompareOp::Gt: return value_less(b, a);
    case CompareOp::Le:
      if (a.is_number() && b.is_number() && (a.is_float() || b.is_float()) &&
          (std::isnan(a.number_as_double()) || std::isnan(b.number_as_double())))
        return false;
      return !value_less(b, a);
    case CompareOp::Ge:
      if (a.is_number() && b.is_number() && (a.is_float() || b.is_float()) &&
          (std::isnan(a.number_as_double()) || std::isnan(b.number_as_double())))
        return false;
      return !value_less(a, b);
    case CompareOp::In: return contains(b, a);
    case CompareOp::NotIn: return !contains(b, a);
  }
  return false;
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!name.empty() && name[0] == '_')
    return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
  switch (obj.kind()) {
    case Value::Kind::String:
    case Value::Kind::List:
    case Value::Kind::Dict: {
      Value method;
      if (find_method(obj, name, &method)) return method;
      if (obj.is_dict()) {
        if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
      }
      return missing_attribute(obj, name);
    }
    case Value::Kind::Object: return obj.as_object()->get_attr(name);
    case Value::Kind::Int:
    case Value::Kind::Float:
    case Value::Kind::Bool:
      if (std::find(numeric_attributes().begin(), numeric_attributes().end(), name) != numeric_attributes().end())
        unsupported("the '", name, "' attribute of numbers");
      return missing_attribute(obj, name);
    default: return missing_attribute(obj, name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  // obj[key] failed: Jinja2 then tries getattr(obj, key) for a string key.
  auto attribute_fallback = [&]() -> Value {
    if (key.is_string()) return get_attr(obj, key.as_string());
    return missing_element(obj, key);
  };
  switch (obj.kind()) {
    case Value::Kind::String: {
      if (!is_intlike(key)) return attribute_fallback();
      const std::u32string u = unicode::decode(obj.as_string());
      bool ok;
      const int64_t i = normalize_index(intlike(key), u.size(), &ok);
      if (!ok) return missing_element(obj, key);
      std::string out;
      unicode::append_utf8(out, u[i]);
      return obj.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
    }
    case Value::Kind::List: {
      const SeqKind k = obj.seq_kind();
      if (!is_intlike(key) || k == SeqKind::DictKeys || k == SeqKind::DictValues || k == SeqKind::DictItems)
        return attribute_fallback();
      bool ok;
      const int64_t i = normalize_index(intlike(key), obj.items().size(), &ok);
      if (!ok) return missing_element(obj, key);
      return obj.items()[i];
    }
    case Value::Kind::Dict: {
      if (value_hashable(key))
        if (const Value* v = obj.as_dict().find(key)) return *v;
      return attribute_fallback();
    }
    default: return attribute_fallback();
  }
}

namespace {

// Python's PySlice_GetIndicesEx for a sequence of length n.
void slice_indices(const Value& start_v, const Value& stop_v, const Value& step_v, int64_t n, int64_t* start,
                   int64_t* stop, int64_t* step) {
  auto as_bound = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (is_intlike(v)) return intlike(v);
    if (v.is_undefined()) fail_undefined(v);
    eval_fail("slice indices must be integers or None or have an __index__ method");
  };
  const auto st = as_bound(step_v);
  *step = st.value_or(1);
  if (*step == 0) eval_fail("slice step cannot be zero");
  const int64_t lower = *step < 0 ? -1 : 0;
  const int64_t upper = *step < 0 ? n - 1 : n;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  *start = clamp(as_bound(start_v), *step < 0 ? upper : lower);
  *stop = clamp(as_bound(stop_v), *step < 0 ? lower : upper);
}

template <typename Seq>
Seq slice_seq(const Seq& s, int64_t start, int64_t stop, int64_t step) {
  Seq out;
  if (step > 0)
    for (int64_t i = start; i < stop; i += step) out.push_back(s[i]);
  else
    for (int64_t i = start; i > stop; i += step) out.push_back(s[i]);
  return out;
}

}  // namespace

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  int64_t b, e, s;
  if (obj.is_string()) {
    const std::u32string u = unicode::decode(obj.as_string());
    slice_indices(start, stop, step, int64_t(u.size()), &b, &e, &s);
    std::string out = unicode::encode(slice_seq(u, b, e, s));
    return obj.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  if (obj.is_list()) {
    const SeqKind k = obj.seq_kind();
    if (k == SeqKind::DictKeys || k == SeqKind::DictValues || k == SeqKind::DictItems)
      eval_fail("'", obj.type_name(), "' object is not subscriptable");
    if (k == SeqKind::Range) unsupported("slicing a range");
    slice_indices(start, stop, step, int64_t(obj.items().size()), &b, &e, &s);
    return Value::list(slice_seq(obj.items(), b, e, s), obj.is_tuple());
  }
  // Jinja2 compiles slices to a plain Python subscript, so these are errors, not undefined.
  if (obj.is_dict()) eval_fail("KeyError: slice(", py_repr(start), ", ", py_repr(stop), ", ", py_repr(step), ")");
  eval_fail("'", obj.type_name(), "' object is not subscriptable");
}

ValueList iterate(const Value& v) {
  if (v.is_list()) charge_steps(v.items().size());
  else if (v.is_dict()) charge_steps(v.as_dict().size());
  else if (v.is_string()) charge_steps(v.as_string().size());
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.items();
    case Value::Kind::String: {
      ValueList out;
      for (char32_t c : unicode::decode(v.as_string())) {
        std::string s;
        unicode::append_utf8(s, c);
        out.push_back(Value(std::move(s)));
      }
      return out;
    }
    case Value::Kind::Dict: {
      ValueList out;
      out.reserve(v.as_dict().size());
      for (const auto& [k, val] : v.as_dict().items()) out.push_back(k);
      return out;
    }
    case Value::Kind::Generator: {
      GeneratorData& g = v.generator_data();
      ValueList rest(g.items.begin() + ptrdiff_t(g.position), g.items.end());
      g.position = g.items.size();
      return rest;
    }
    default: eval_fail("'", v.type_name(), "' object is not iterable");
  }
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return unicode::length(v.as_string());
    case Value::Kind::List: return v.items().size();
    case Value::Kind::Dict: return v.as_dict().size();
    case Value::Kind::Object: {
      if (v.as_object()->type_name() == "LoopContext") return size_t(v.as_object()->get_attr("length").as_int());
      [[fallthrough]];
    }
    default: eval_fail("object of type '", v.type_name(), "' has no len()");
  }
}

Value call_value(Interpreter& in, const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.is_object() && callee.as_object()->is_callable()) return callee.as_object()->call(in, args);
  eval_fail("'", callee.type_name(), "' object is not callable");
}

ArgBinder::ArgBinder(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> params)
    : function_(function), params_(params), values_(params.size(), nullptr) {
  if (args.positional.size() > params_.size())
    eval_fail(function_, "() takes at most ", params_.size(), " argument(s) (", args.positional.size(), " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = &args.positional[i];
  for (const auto& [name, value] : args.keywords) {
    auto it = std::find(params_.begin(), params_.end(), name);
    if (it == params_.end()) eval_fail(function_, "() got an unexpected keyword argument '", name, "'");
    const size_t idx = size_t(it - params_.begin());
    if (values_[idx]) eval_fail(function_, "() got multiple values for argument '", name, "'");
    values_[idx] = &value;
  }
}

const Value& ArgBinder::get(size_t i) const {
  if (!values_[i]) eval_fail(function_, "() missing required argument '", params_[i], "'");
  return *values_[i];
}

int64_t arg_int(const Value& v, std::string_view what) {
  if (is_intlike(v)) return intlike(v);
  if (v.is_undefined()) fail_undefined(v);
  eval_fail(what, ": an integer is required, not '", v.type_name(), "'");
}

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  const std::u32string u = unicode::decode(s);
  std::u32string set;
  const bool whitespace = chars.is_none();
  if (!whitespace) {
    if (chars.is_undefined()) fail_undefined(chars);
    if (!chars.is_string()) eval_fail("strip arg must be None or str");
    set = unicode::decode(chars.as_string());
  }
  auto strip_char = [&](char32_t c) {
    return whitespace ? unicode::is_space(c) : set.find(c) != std::u32string::npos;
  };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_char(u[b])) ++b;
  if (right)
    while (e > b && strip_char(u[e - 1])) --e;
  if (b == 0 && e == u.size()) return std::string(s);
  return unicode::encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  const std::u32string u = unicode::decode(s);
  std::u32string current;
  for (size_t i = 0; i < u.size(); ++i) {
    const char32_t c = u[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      current.push_back(c);
      continue;
    }
    if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
    lines.push_back(unicode::encode(current));
    current.clear();
  }
  if (!current.empty()) lines.push_back(unicode::encode(current));
  return lines;
}

}  // namespace fathom::jinja
