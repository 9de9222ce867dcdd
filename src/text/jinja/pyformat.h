#pragma once
// Python's text forms of values, byte for byte: str(), repr(), float repr,
// json.dumps (as transformers' tojson calls it), `%` formatting and str.format.
#include <optional>
#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace fathom::jinja {

// repr(float): shortest round-trip digits, '1.0', '1e-05', '1e+16', 'inf', 'nan'.
std::string py_float_repr(double d);
// repr(str): Python's quoting and escapes (non-printable code points escaped).
std::string py_string_repr(std::string_view s);
// str(value) as Jinja prints it ({{ x }}): None → 'None', lists as their repr, undefined → ''.
std::string py_str(const Value& v);
std::string py_repr(const Value& v);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // json.dumps indent (an int n becomes n spaces)
  std::optional<std::string> item_separator;  // default ', ', or ',' with an indent
  std::optional<std::string> key_separator;   // default ': '
  bool sort_keys = false;
  bool ensure_ascii = false;  // transformers' tojson default
};
// json.dumps(value, ...) with Python's exact output.
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

// markupsafe.escape of a string: & < > " ' become entities.
std::string html_escape(std::string_view s);
// markupsafe.escape(value): Markup stays as it is, anything else is str()'d and escaped.
Value escape_value(const Value& v);

// `format % args` (printf-style); args is a tuple, a dict (for %(name)s) or one value.
std::string py_percent_format(std::string_view format, const Value& args);
// format.format(*args, **kwargs)
std::string py_str_format(std::string_view format, const CallArgs& args);

}  // namespace fathom::jinja
