#include "text/jinja/template.h"

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"
#include "text/jinja/unicode.h"

namespace fathom::jinja {

Template::Template(std::string source, std::string name, LexerOptions options)
    : source_(std::move(source)), name_(std::move(name)) {
  if (!unicode::valid_utf8(source_))
    throw TemplateError(TemplateError::Kind::Syntax, name_, SourcePos{1, 1}, "the template is not valid UTF-8");
  const std::vector<Token> tokens = tokenize(source_, options, name_);
  ast_ = std::make_unique<TemplateAst>(parse_template(tokens, name_));
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& variables, const RenderOptions& options) const {
  if (!variables.is_object()) throw fathom::Error("jinja: template variables must be a JSON object");
  Dict vars;
  try {
    for (const auto& [k, v] : variables.items()) vars.set(Value(k), Value::from_json(v));
  } catch (const EvalError& e) {
    throw fathom::Error(std::string("jinja: template variables: ") + e.what());
  }
  return render(vars, options);
}

std::string Template::render(const Dict& variables, const RenderOptions& options) const {
  RenderBudget budget(options);
  ActiveBudgetScope active(budget);
  Interpreter in(name_, variables, options.clock, budget);
  std::string out;
  render_body(ast_->body, in, out);
  return out;
}

}  // namespace fathom::jinja
