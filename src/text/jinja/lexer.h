#pragma once
// Splits template source into tokens exactly as Jinja2's lexer does: text
// data, {{ }} and {% %} tags with their expression tokens, comments dropped,
// raw blocks kept verbatim, whitespace control ({%- -%} {%+ +%}) and the
// trim_blocks / lstrip_blocks / keep_trailing_newline settings applied.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/diagnostics.h"

namespace fathom::jinja {

struct LexerOptions {
  bool trim_blocks = true;   // transformers' settings
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

enum class TokenType { Data, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, Eof };

struct Token {
  TokenType type;
  std::string value;  // text for data/name/string (decoded)/operator
  SourcePos pos;
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Throws TemplateError (Syntax) naming the template and position.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options, const std::string& template_name);

// What a token is, for error messages: "name 'foo'", "'}}'", "end of template".
std::string describe_token(const Token& t);

}  // namespace fathom::jinja
