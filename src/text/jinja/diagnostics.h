#pragma once
// Errors of the Jinja interpreter. Every error that reaches a caller is a
// TemplateError naming the template, the line:column of the construct and what
// went wrong; builtins throw EvalError (no position) and the expression node
// that called them adds its position.
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace fathom::jinja {

struct SourcePos {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in code points
};

class TemplateError : public fathom::Error {
 public:
  enum class Kind {
    Syntax,       // the template does not parse
    Unsupported,  // valid Jinja2 that this interpreter does not implement
    Render,       // a Python/Jinja error while rendering (type error, undefined use, ...)
    Raised,       // the template called raise_exception(message)
    Limit,        // a bound of RenderLimits: steps, deadline, cancellation, sizes, nesting
  };
  TemplateError(Kind kind, const std::string& template_name, SourcePos pos, const std::string& detail)
      : fathom::Error(format(kind, template_name, pos, detail)), kind_(kind), pos_(pos), detail_(detail) {}
  Kind kind() const { return kind_; }
  SourcePos pos() const { return pos_; }
  const std::string& detail() const { return detail_; }

 private:
  static std::string format(Kind kind, const std::string& name, SourcePos pos, const std::string& detail) {
    const char* what = kind == Kind::Syntax        ? "syntax error"
                       : kind == Kind::Unsupported ? "unsupported"
                       : kind == Kind::Raised      ? "raise_exception"
                       : kind == Kind::Limit       ? "limit"
                                                   : "error";
    return "jinja " + std::string(what) + " at " + name + ":" + std::to_string(pos.line) + ":" +
           std::to_string(pos.column) + ": " + detail;
  }
  Kind kind_;
  SourcePos pos_;
  std::string detail_;
};

// Thrown by builtins and value operations; the calling node adds the position.
class EvalError : public std::runtime_error {
 public:
  explicit EvalError(const std::string& what, TemplateError::Kind kind = TemplateError::Kind::Render)
      : std::runtime_error(what), kind_(kind) {}
  TemplateError::Kind kind() const { return kind_; }

 private:
  TemplateError::Kind kind_;
};

template <typename... Parts>
[[noreturn]] inline void eval_fail(const Parts&... parts) {
  std::string msg;
  ((msg += to_message_part(parts)), ...);
  throw EvalError(msg);
}

template <typename... Parts>
[[noreturn]] inline void unsupported(const Parts&... parts) {
  std::string msg;
  ((msg += to_message_part(parts)), ...);
  throw EvalError(msg, TemplateError::Kind::Unsupported);
}

}  // namespace fathom::jinja
