#pragma once
// Regular expressions (the ECMAScript subset JSON Schema's `pattern` uses in
// practice) into grammar rules. The rule matches the JSON-encoded form of the
// strings the regex matches in full — what goes between a JSON string's
// quotes — so `"` and `\` come out escaped. Generated strings match the
// pattern anchored at both ends, which is also a match of the unanchored
// pattern JSON Schema asks for.
//
// Supported: literals, escapes (\d \w \s and their negations, \t \n \r \f \v,
// \xHH, \uHHHH, escaped punctuation), '.', classes with ranges and negation,
// groups (capturing, (?:…), (?<name>…)), alternation, * + ? {n} {n,} {n,m}
// (lazy forms too), ^ at the start and $ at the end. Anything else
// (backreferences, lookaround, \b, \p{…}, flags) throws naming the construct.
#include <string_view>

#include "grammar/grammar.h"

namespace fathom::grammar {

Element regex_to_grammar(Grammar& grammar, std::string_view pattern);

}  // namespace fathom::grammar
