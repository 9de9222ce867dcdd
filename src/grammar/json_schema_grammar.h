#pragma once
// JSON Schema into grammar rules that generate exactly JSON texts the schema
// accepts (a subset of them: the grammar may leave valid texts out, never let
// an invalid one in). Properties come in the schema's order; optional ones may
// be left out; additional properties are never generated when `properties`
// names any (leaving them out is always valid). Whitespace between tokens is
// one space or one line break with its indentation, numbers have at most 16 integer and 16 fraction digits and 2 exponent digits (no overflow to infinity), so an
// answer cannot run on forever inside a number or between tokens.
//
// Supported: type (also as a list), properties, required,
// additionalProperties, enum, const, anyOf, oneOf (as anyOf), allOf of one
// schema, $ref into the document ("#", "#/$defs/…", any JSON pointer; may
// recurse), items, prefixItems, minItems, maxItems, minLength, maxLength,
// pattern (grammar/regex_grammar.h), format (date, time, date-time, uuid,
// email, ipv4, hostname, uri), minimum/maximum (integer-valued bounds; for
// integers also exclusiveMinimum/exclusiveMaximum), and every annotation
// keyword. Any other keyword that constrains values throws
// UnsupportedSchema naming it and where it is.
#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "core/error.h"
#include "grammar/grammar.h"

namespace fathom::grammar {

struct UnsupportedSchema : Error {
  using Error::Error;
};

class JsonSchemaCompiler {
 public:
  // Whitespace between two tokens of the JSON text: none, one space, or a
  // line break and up to kMaxIndent spaces.
  static constexpr int kMaxIndent = 16;

  // `root` is the document $ref pointers resolve in; it must outlive the compiler.
  JsonSchemaCompiler(Grammar& grammar, const nlohmann::ordered_json& root);

  // A JSON value valid under `schema` (a part of the root document).
  Element value(const nlohmann::ordered_json& schema, const std::string& path = "#");
  Element whitespace();
  // The JSON string literal of `text`, quotes and escapes included.
  Sequence string_literal(const std::string& text);

 private:
  Element typed(const std::string& type, const nlohmann::ordered_json& schema, const std::string& path);
  Element string_value(const nlohmann::ordered_json& schema, const std::string& path);
  Element integer_value(const nlohmann::ordered_json& schema, const std::string& path);
  Element number_value(const nlohmann::ordered_json& schema, const std::string& path);
  Element object_value(const nlohmann::ordered_json& schema, const std::string& path);
  Element array_value(const nlohmann::ordered_json& schema, const std::string& path);
  Element reference(const std::string& ref, const std::string& path);
  Element any_value();
  Element any_string();
  Element string_char(bool counted = false);
  Element json_literal(const nlohmann::ordered_json& value);

  Grammar& g_;
  const nlohmann::ordered_json& root_;
  std::map<std::string, uint32_t> refs_;  // a rule per $ref target, made once (refs may recurse)
  std::map<std::string, Element> shared_;  // rules every value may use (whitespace, string chars)
  int depth_ = 0;
};

// A grammar whose root is a JSON text valid under `schema` (whitespace as
// between tokens may come before it).
Grammar json_schema_grammar(const nlohmann::ordered_json& schema);

}  // namespace fathom::grammar
