#pragma once
// Builds the AST from tokens with Jinja2's grammar (operator precedence,
// filters and tests binding tighter than binary operators, tuples without
// parentheses, `for ... if ...`, `{% set %}` blocks, macros, call blocks).
// Unknown filters/tests and tags that are valid Jinja2 but not implemented here
// are errors naming the construct and its position.
#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace fathom::jinja {

TemplateAst parse_template(const std::vector<Token>& tokens, const std::string& template_name);

}  // namespace fathom::jinja
