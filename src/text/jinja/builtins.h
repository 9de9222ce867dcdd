#pragma once
// Operations on Values with the semantics of Python and Jinja2's sandboxed
// environment (ops.cpp), the filters and tests (filters.cpp, tests.cpp), the
// methods of str/list/dict (methods.cpp) and the global functions (globals.cpp).
// They throw EvalError; the calling node adds the source position.
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/value.h"

namespace fathom::jinja {

class Interpreter;

enum class BinaryOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

using FilterFn = Value (*)(Interpreter& in, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter& in, const Value& input, CallArgs& args);

enum class BuiltinLookup { Found, Unsupported, Unknown };
// nullptr with Unsupported for Jinja2 builtins this interpreter does not implement.
FilterFn find_filter(std::string_view name, BuiltinLookup* status);
TestFn find_test(std::string_view name, BuiltinLookup* status);
// range, dict, namespace, raise_exception, strftime_now, joiner, cycler; nullptr if none.
const Value* find_global(std::string_view name);

// ---- Python semantics on values (ops.cpp) ----
Value binary_op(BinaryOp op, const Value& a, const Value& b);
bool compare_values(CompareOp op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
Value negate(const Value& v);
Value unary_plus(const Value& v);
// Jinja's sandboxed getattr (obj.name) and getitem (obj[key]).
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step], none for an omitted bound.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python iter(); consumes a generator; undefined iterates as empty.
ValueList iterate(const Value& v);
// Python len(); fails for generators, numbers, none.
size_t py_len(const Value& v);
Value call_value(Interpreter& in, const Value& callee, CallArgs& args);
// Raises the undefined value's error (for operations Jinja's Undefined refuses).
[[noreturn]] void fail_undefined(const Value& v);
// Python's sorting order for sort/dictsort/min/max (TypeError across types).
bool value_less(const Value& a, const Value& b);

// ---- methods of str, list, dict (methods.cpp) ----
// The bound method receiver.name, or nullptr-kind undefined when Python has no such method.
bool find_method(const Value& receiver, const std::string& name, Value* out);
Value call_method(Interpreter& in, const Value& receiver, const std::string& name, CallArgs& args);

// ---- arguments of builtins ----
// Binds positional and keyword arguments to parameter names like a Python signature;
// fails on too many arguments or an unknown keyword.
class ArgBinder {
 public:
  ArgBinder(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> params);
  bool has(size_t i) const { return values_[i] != nullptr; }
  const Value& get(size_t i) const;  // fails when missing
  Value get_or(size_t i, Value fallback) const { return has(i) ? *values_[i] : std::move(fallback); }

 private:
  std::string function_;
  std::vector<std::string_view> params_;
  std::vector<const Value*> values_;
};

// Python int()/bool-as-int of an argument; fails for other types.
int64_t arg_int(const Value& v, std::string_view what);
// Python str.strip/lstrip/rstrip with optional chars (none = whitespace).
std::string py_strip(std::string_view s, const Value& chars, bool left, bool right);
// str.splitlines() (keepends false).
std::vector<std::string> py_splitlines(std::string_view s);

}  // namespace fathom::jinja
