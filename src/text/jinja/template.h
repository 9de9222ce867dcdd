#pragma once
// A compiled Jinja2 template, rendered the way transformers renders chat
// templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, {% generation %}, tojson with ensure_ascii=False,
// raise_exception and strftime_now). Errors are TemplateErrors naming the
// construct and its line:column. A Template is immutable and can be rendered
// from several threads at once.
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja/budget.h"
#include "text/jinja/diagnostics.h"
#include "text/jinja/lexer.h"
#include "text/jinja/value.h"

namespace fathom::jinja {

struct TemplateAst;

// The limits (budget.h) bound every rendering by default: max_steps, max_output_bytes,
// max_value_bytes, max_depth, and optionally a deadline and a cancellation check, e.g.
//   jinja::RenderOptions o;  o.deadline = request_deadline;  o.cancelled = [&] { return client_gone; };
// Past one, render throws TemplateError of Kind::Limit naming the limit and its value.
struct RenderOptions : RenderLimits {
  // The clock strftime_now reads (seconds since the epoch, local time zone); default: now.
  std::function<std::time_t()> clock;
};

class Template {
 public:
  // Parses `source`; throws TemplateError (Syntax or Unsupported) on failure.
  explicit Template(std::string source, std::string name = "template", LexerOptions options = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the given variables (a JSON object; key order is kept).
  std::string render(const nlohmann::ordered_json& variables, const RenderOptions& options = {}) const;
  // Renders with variables already converted to Values.
  std::string render(const Dict& variables, const RenderOptions& options = {}) const;

  const std::string& source() const { return source_; }
  const std::string& name() const { return name_; }

 private:
  std::string source_;
  std::string name_;
  std::unique_ptr<TemplateAst> ast_;
};

}  // namespace fathom::jinja
