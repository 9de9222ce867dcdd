// Jinja2's builtin tests (`x is defined`, `x is string`, ...), with Python's
// notion of what is a sequence, an iterable, a number or callable.
#include <unordered_map>
#include <unordered_set>

#include "text/jinja/builtins.h"
#include "text/jinja/diagnostics.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace fathom::jinja {
namespace {

const Value& one_arg(const CallArgs& args, std::string_view test) {
  if (args.positional.size() != 1 || !args.keywords.empty())
    eval_fail("test '", test, "' takes exactly one argument");
  return args.positional[0];
}

void no_args(const CallArgs& args, std::string_view test) {
  if (!args.positional.empty() || !args.keywords.empty()) eval_fail("test '", test, "' takes no arguments");
}

bool t_defined(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "defined"), !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "undefined"), v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "none"), v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "boolean"), v.is_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "false"), v.is_bool() && !v.as_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "true"), v.is_bool() && v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "integer"), v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "float"), v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "number"), v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "string"), v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "mapping"), v.is_dict(); }

// len(value) and value.__getitem__ both exist
bool t_sequence(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "sequence");
  if (v.is_string() || v.is_dict() || v.is_undefined()) return true;
  if (v.is_list()) {
    const SeqKind k = v.seq_kind();
    return k == SeqKind::List || k == SeqKind::Tuple || k == SeqKind::Range;
  }
  return false;
}

// iter(value) works
bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "iterable");
  if (v.is_string() || v.is_list() || v.is_dict() || v.is_generator() || v.is_undefined()) return true;
  return v.is_object() && v.as_object()->type_name() == "LoopContext";
}

bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "callable");
  if (v.is_undefined()) return true;  // jinja2.Undefined defines __call__
  return v.is_object() && v.as_object()->is_callable();
}

bool t_lower(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  bool cased = false;
  for (char32_t c : unicode::decode(py_str(v))) {
    if (unicode::is_upper(c)) return false;
    if (unicode::is_lower(c)) cased = true;
    else if (unicode::is_cased(c)) return false;
  }
  return cased;
}

bool t_upper(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  bool cased = false;
  for (char32_t c : unicode::decode(py_str(v))) {
    if (unicode::is_lower(c)) return false;
    if (unicode::is_upper(c)) cased = true;
    else if (unicode::is_cased(c)) return false;
  }
  return cased;
}

bool t_odd(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "odd");
  return values_equal(binary_op(BinaryOp::Mod, v, Value(int64_t(2))), Value(int64_t(1)));
}
bool t_even(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "even");
  return values_equal(binary_op(BinaryOp::Mod, v, Value(int64_t(2))), Value(int64_t(0)));
}
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  return values_equal(binary_op(BinaryOp::Mod, v, one_arg(a, "divisibleby")), Value(int64_t(0)));
}
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) { return v.same_object(one_arg(a, "sameas")); }
bool t_escaped(Interpreter&, const Value& v, CallArgs& a) { return no_args(a, "escaped"), v.is_markup(); }
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return contains(one_arg(a, "in"), v); }
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return values_equal(v, one_arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !values_equal(v, one_arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return compare_values(CompareOp::Lt, v, one_arg(a, "lt")); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return compare_values(CompareOp::Le, v, one_arg(a, "le")); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return compare_values(CompareOp::Gt, v, one_arg(a, "gt")); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return compare_values(CompareOp::Ge, v, one_arg(a, "ge")); }

bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "filter");
  if (!v.is_string()) return false;
  BuiltinLookup status;
  return find_filter(v.as_string(), &status) != nullptr;
}

bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "test");
  if (!v.is_string()) return false;
  BuiltinLookup status;
  return find_test(v.as_string(), &status) != nullptr;
}

const std::unordered_map<std::string_view, TestFn>& tests() {
  static const std::unordered_map<std::string_view, TestFn> m = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none},       {"boolean", t_boolean},
      {"false", t_false},     {"true", t_true},           {"integer", t_integer}, {"float", t_float},
      {"number", t_number},   {"string", t_string},       {"mapping", t_mapping}, {"sequence", t_sequence},
      {"iterable", t_iterable}, {"callable", t_callable}, {"lower", t_lower},     {"upper", t_upper},
      {"odd", t_odd},         {"even", t_even},           {"divisibleby", t_divisibleby},
      {"sameas", t_sameas},   {"escaped", t_escaped},     {"in", t_in},
      {"==", t_eq},           {"eq", t_eq},               {"equalto", t_eq},      {"!=", t_ne},
      {"ne", t_ne},           {"<", t_lt},                {"lt", t_lt},           {"lessthan", t_lt},
      {"<=", t_le},           {"le", t_le},               {">", t_gt},            {"gt", t_gt},
      {"greaterthan", t_gt},  {">=", t_ge},               {"ge", t_ge},           {"filter", t_filter},
      {"test", t_test},
  };
  return m;
}

}  // namespace

TestFn find_test(std::string_view name, BuiltinLookup* status) {
  auto it = tests().find(name);
  if (it != tests().end()) {
    *status = BuiltinLookup::Found;
    return it->second;
  }
  *status = BuiltinLookup::Unknown;
  return nullptr;
}

}  // namespace fathom::jinja
