// Global functions: Jinja2's range, dict, namespace, joiner, and transformers'
// raise_exception and strftime_now.
#include <ctime>
#include <unordered_map>

#include "text/jinja/builtins.h"
#include "text/jinja/diagnostics.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"
#include "text/jinja/pyformat.h"

namespace fathom::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // Jinja's sandbox refuses larger ranges

Value g_range(Interpreter&, CallArgs& args) {
  if (!args.keywords.empty()) eval_fail("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) eval_fail("range expected 1 to 3 arguments, got ", p.size());
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = arg_int(p[0], "range");
  } else {
    start = arg_int(p[0], "range");
    stop = arg_int(p[1], "range");
    if (p.size() == 3) step = arg_int(p[2], "range");
  }
  if (step == 0) eval_fail("range() arg 3 must not be zero");
  // In 128 bits: stop - start overflows int64 for far-apart bounds.
  const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
  const __int128 stride = step > 0 ? __int128(step) : -__int128(step);
  const __int128 count = span > 0 ? (span + stride - 1) / stride : 0;
  if (count > kMaxRange)
    eval_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", kMaxRange, ").");
  return Value::range(start, stop, step);
}

// dict(mapping_or_pairs, **kwargs)
Dict make_dict(CallArgs& args, std::string_view function) {
  if (args.positional.size() > 1) eval_fail(function, " expected at most 1 argument, got ", args.positional.size());
  Dict d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_undefined()) fail_undefined(src);  // dict() asks it for .keys
    if (src.is_dict()) {
      d = src.as_dict();
    } else {
      for (const auto& pair : iterate(src)) {
        const ValueList kv = iterate(pair);
        if (kv.size() != 2) eval_fail("dictionary update sequence element has length ", kv.size(), "; 2 is required");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keywords) d.set(Value(k), v);
  return d;
}

Value g_dict(Interpreter&, CallArgs& args) { return Value::dict(make_dict(args, "dict")); }

Value g_namespace(Interpreter& in, CallArgs& args) {
  auto ns = std::make_shared<NamespaceObject>();
  in.track_namespace(ns);
  const Dict attrs = make_dict(args, "namespace");
  for (const auto& [k, v] : attrs.items()) {
    if (!k.is_string()) eval_fail("namespace attribute names must be strings");
    ns->set_attr(k.as_string(), v);
  }
  return Value::object(ns);
}

Value g_raise_exception(Interpreter&, CallArgs& args) {
  ArgBinder a("raise_exception", args, {"message"});
  throw EvalError(py_str(a.get(0)), TemplateError::Kind::Raised);
}

Value g_strftime_now(Interpreter& in, CallArgs& args) {
  ArgBinder a("strftime_now", args, {"format"});
  if (!a.get(0).is_string()) eval_fail("strftime() argument 1 must be str, not ", a.get(0).type_name());
  const std::string& fmt = a.get(0).as_string();
  // datetime.now() is naive: %z and %Z are empty; %f (microseconds) is not modelled.
  std::string c_fmt;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      const char k = fmt[i + 1];
      if (k == 'z' || k == 'Z') {
        ++i;
        continue;
      }
      if (k == 'f') unsupported("%f in strftime_now");
      c_fmt += fmt[i];
      c_fmt += k;
      ++i;
      continue;
    }
    c_fmt += fmt[i];
  }
  const std::time_t now = in.now();
  std::tm tm{};
  localtime_r(&now, &tm);
  if (c_fmt.empty()) return Value("");
  std::string out(256 + c_fmt.size() * 8, '\0');
  const size_t n = std::strftime(out.data(), out.size(), c_fmt.c_str(), &tm);
  if (n == 0) eval_fail("strftime_now: format produced no output or is too long");
  out.resize(n);
  return Value(std::move(out));
}

Value g_joiner(Interpreter&, CallArgs& args) {
  ArgBinder a("joiner", args, {"sep"});
  const std::string sep = py_str(a.get_or(0, Value(", ")));
  auto used = std::make_shared<bool>(false);
  return Value::object(std::make_shared<BuiltinFunction>("joiner", [sep, used](Interpreter&, CallArgs& call_args) {
    ArgBinder none("joiner", call_args, {});
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  }));
}

Value g_unsupported(std::string_view name) {
  const std::string n(name);
  return Value::object(std::make_shared<BuiltinFunction>(n, [n](Interpreter&, CallArgs&) -> Value {
    unsupported("the Jinja2 global '", n, "'");
  }));
}

const std::unordered_map<std::string, Value>& globals() {
  static const std::unordered_map<std::string, Value> m = [] {
    std::unordered_map<std::string, Value> g;
    auto add = [&](const std::string& name, BuiltinFunction::Fn fn) {
      g.emplace(name, Value::object(std::make_shared<BuiltinFunction>(name, std::move(fn))));
    };
    add("range", g_range);
    add("dict", g_dict);
    add("namespace", g_namespace);
    add("raise_exception", g_raise_exception);
    add("strftime_now", g_strftime_now);
    add("joiner", g_joiner);
    g.emplace("cycler", g_unsupported("cycler"));
    g.emplace("lipsum", g_unsupported("lipsum"));
    return g;
  }();
  return m;
}

}  // namespace

const Value* find_global(std::string_view name) {
  auto it = globals().find(std::string(name));
  return it == globals().end() ? nullptr : &it->second;
}

}  // namespace fathom::jinja
