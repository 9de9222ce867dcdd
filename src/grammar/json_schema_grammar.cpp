#include "grammar/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "grammar/regex_grammar.h"

namespace fathom::grammar {

namespace {

using ojson = nlohmann::ordered_json;

// Keywords that constrain values and that the grammar cannot enforce.
const std::set<std::string> kUnsupported = {
    "not",         "if",          "then",          "else",        "dependentRequired", "dependentSchemas",
    "dependencies", "patternProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems",
    "contains",    "minContains", "maxContains",   "multipleOf",  "additionalItems",   "$dynamicRef",
    "$recursiveRef"};
// Keywords that only describe.
const std::set<std::string> kAnnotations = {
    "title",    "description", "default", "examples", "example",  "$schema",          "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",  "definitions",      "contentMediaType",
    "contentEncoding", "$anchor", "nullable", "discriminator", "strict"};

[[noreturn]] void unsupported(const std::string& path, const std::string& what) {
  throw UnsupportedSchema("JSON Schema: " + what + " at " + path + " is not supported");
}

const ojson* find(const ojson& schema, const char* key) {
  const auto it = schema.find(key);
  return it == schema.end() ? nullptr : &*it;
}

int64_t count_field(const ojson& schema, const char* key, int64_t fallback, const std::string& path) {
  const ojson* v = find(schema, key);
  if (!v) return fallback;
  if (!v->is_number_integer() || v->get<int64_t>() < 0)
    throw UnsupportedSchema("JSON Schema: '" + std::string(key) + "' at " + path + " must be a non-negative integer");
  return v->get<int64_t>();
}

// Only annotations (and $defs) beside `keyword`.
void expect_alone(const ojson& schema, const char* keyword, const std::string& path) {
  for (const auto& [k, v] : schema.items())
    if (k != keyword && !kAnnotations.count(k) && k.rfind("x-", 0) != 0)
      unsupported(path, "'" + k + "' beside '" + keyword + "'");
}

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
constexpr int64_t kLargest = 999999999999999999;  // 18 digits: bounds beyond are clamped

// The integers the bounds allow, [lo, hi], from inclusive and exclusive
// limits (draft 4's boolean exclusiveMinimum too); lo is INT64_MIN and hi
// kUnbounded where there is no limit.
std::pair<int64_t, int64_t> integer_bounds(const ojson& schema, const std::string& path) {
  auto limit = [&](const char* key) -> std::optional<double> {
    const ojson* v = find(schema, key);
    if (!v || v->is_boolean()) return std::nullopt;
    if (!v->is_number())
      throw UnsupportedSchema("JSON Schema: '" + std::string(key) + "' at " + path + " must be a number");
    return std::clamp(v->get<double>(), -double(kLargest), double(kLargest));
  };
  auto flag = [&](const char* key) {
    const ojson* v = find(schema, key);
    return v && v->is_boolean() && v->get<bool>();
  };
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = kUnbounded;
  if (auto m = limit("minimum")) lo = int64_t(flag("exclusiveMinimum") ? std::floor(*m) + 1 : std::ceil(*m));
  if (auto m = limit("exclusiveMinimum")) lo = std::max(lo, int64_t(std::floor(*m) + 1));
  if (auto m = limit("maximum")) hi = int64_t(flag("exclusiveMaximum") ? std::ceil(*m) - 1 : std::floor(*m));
  if (auto m = limit("exclusiveMaximum")) hi = std::min(hi, int64_t(std::ceil(*m) - 1));
  return {lo, hi};
}

const char* const kFormats[][2] = {
    {"date", R"(\d{4}-(((0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8]))|((0[13-9]|1[0-2])-(29|30))|((0[13578]|1[02])-31)))"},
    {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"date-time",
     R"(\d{4}-(((0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8]))|((0[13-9]|1[0-2])-(29|30))|((0[13578]|1[02])-31))T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"uuid", R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"},
    {"email",
     R"([a-zA-Z0-9_%+-]{1,32}(\.[a-zA-Z0-9_%+-]{1,32}){0,3}@[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,3}\.[a-z]{2,10})"},
    {"ipv4", R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"},
    {"hostname", R"([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,4})"},
    {"uri",
     R"(https?://[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,4}(/[a-zA-Z0-9._~-]{0,32}){0,8})"},
};

// Digit strings of one length from x to y (x <= y), as alternatives of byte sets.
Sequence fixed_length_range(Grammar& g, const std::string& x, const std::string& y) {
  if (x.empty()) return {};
  if (x == y) return g.literal(x);
  if (x[0] == y[0]) {
    Sequence s = g.literal(x.substr(0, 1));
    const Sequence rest = fixed_length_range(g, x.substr(1), y.substr(1));
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  }
  const size_t n = x.size();
  ByteSet digit;
  for (int d = '0'; d <= '9'; ++d) digit.set(size_t(d));
  auto digits_between = [&](char a, char b) {
    ByteSet s;
    for (int d = a; d <= b; ++d) s.set(size_t(d));
    return g.bytes(s);
  };
  const std::string zeros(n - 1, '0'), nines(n - 1, '9');
  std::vector<Sequence> alts;
  char first = x[0], last = y[0];
  if (x.substr(1) != zeros) {
    Sequence s = g.literal(x.substr(0, 1));
    const Sequence rest = fixed_length_range(g, x.substr(1), nines);
    s.insert(s.end(), rest.begin(), rest.end());
    alts.push_back(std::move(s));
    ++first;
  }
  if (y.substr(1) != nines) {
    Sequence s = g.literal(y.substr(0, 1));
    const Sequence rest = fixed_length_range(g, zeros, y.substr(1));
    s.insert(s.end(), rest.begin(), rest.end());
    alts.push_back(std::move(s));
    --last;
  }
  if (first <= last) {
    Sequence s = {digits_between(first, last)};
    if (n > 1) s.push_back(g.repeat({g.bytes(digit)}, int64_t(n - 1), int64_t(n - 1)));
    alts.push_back(std::move(s));
  }
  return {g.choice(std::move(alts), "digits")};
}

// Decimal integers in [a, b] without sign or leading zeros; b may be kUnbounded.
Element natural_range(Grammar& g, int64_t a, int64_t b) {
  const int64_t top = b == kUnbounded ? std::max<int64_t>(a, 9999999999999999) : b;  // 16 digits
  std::vector<Sequence> alts;
  int64_t low_of_length = 0, high_of_length = 9;
  for (int length = 1; length <= 18 && low_of_length <= top; ++length) {
    const int64_t lo = std::max(a, low_of_length), hi = std::min(top, high_of_length);
    if (lo <= hi) {
      std::string x = std::to_string(lo), y = std::to_string(hi);
      alts.push_back(fixed_length_range(g, x, y));
    }
    if (length == 18) break;  // 19 nines would not fit in int64
    low_of_length = high_of_length + 1;
    high_of_length = high_of_length * 10 + 9;
  }
  return g.choice(std::move(alts), "natural");
}

}  // namespace

JsonSchemaCompiler::JsonSchemaCompiler(Grammar& grammar, const ojson& root) : g_(grammar), root_(root) {}

Element JsonSchemaCompiler::whitespace() {
  if (const auto it = shared_.find("ws"); it != shared_.end()) return it->second;
  // Nothing, a space, or one line break and its indentation: room for compact
  // and pretty-printed JSON, none for a model that would rather emit blank
  // lines than the next token.
  return shared_["ws"] =
             g_.choice({{}, {g_.byte(' ')}, {g_.byte('\n'), g_.repeat({g_.byte(' ')}, 0, kMaxIndent)}}, "ws");
}

Element JsonSchemaCompiler::string_char(bool counted) {
  // A counted string (minLength, maxLength) keeps to characters that are one
  // code point and one UTF-16 unit however they are read: no characters
  // beyond U+FFFF and no \u escapes (a surrogate pair would be two escapes
  // but one character). JSON Schema counts code points, JavaScript's zod
  // counts UTF-16 units; these strings pass both.
  const char* key = counted ? "char_counted" : "char";
  if (const auto it = shared_.find(key); it != shared_.end()) return it->second;
  ByteSet escaped, hex;
  for (const char c : std::string("\"\\/bfnrt")) escaped.set(uint8_t(c));
  for (const char c : std::string("0123456789abcdefABCDEF")) hex.set(uint8_t(c));
  std::vector<Sequence> alts = {{g_.code_point_ranges({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, counted ? 0xFFFF : 0x10FFFF}})},
                                {g_.byte('\\'), g_.bytes(escaped)}};
  if (!counted) {
    Sequence unicode_escape = g_.literal("\\u");
    unicode_escape.push_back(g_.repeat({g_.bytes(hex)}, 4, 4));
    alts.push_back(std::move(unicode_escape));
  }
  return shared_[key] = g_.choice(std::move(alts), "string_char");
}

Element JsonSchemaCompiler::any_string() {
  if (const auto it = shared_.find("string"); it != shared_.end()) return it->second;
  return shared_["string"] = g_.choice({{g_.byte('"'), g_.star({string_char()}), g_.byte('"')}}, "string");
}

Sequence JsonSchemaCompiler::string_literal(const std::string& text) { return g_.literal(ojson(text).dump()); }

Element JsonSchemaCompiler::json_literal(const ojson& value) { return g_.choice({g_.literal(value.dump())}, "const"); }

Element JsonSchemaCompiler::any_value() {
  if (const auto it = shared_.find("any"); it != shared_.end()) return it->second;
  const uint32_t value = g_.add_rule("any_value");
  shared_["any"] = Grammar::ref(value);
  const Element ws = whitespace();
  const Element member_seq =
      g_.choice({{any_string(), ws, g_.byte(':'), ws, Grammar::ref(value)}}, "any_member");
  const Element object = g_.choice(
      {{g_.byte('{'), ws, g_.byte('}')},
       {g_.byte('{'), ws, member_seq, g_.star({ws, g_.byte(','), ws, member_seq}), ws, g_.byte('}')}},
      "any_object");
  const Element array = g_.choice({{g_.byte('['), ws, g_.byte(']')},
                                   {g_.byte('['), ws, Grammar::ref(value),
                                    g_.star({ws, g_.byte(','), ws, Grammar::ref(value)}), ws, g_.byte(']')}},
                                  "any_array");
  g_.add_alternative(value, {object});
  g_.add_alternative(value, {array});
  g_.add_alternative(value, {any_string()});
  g_.add_alternative(value, {number_value(ojson::object(), "#")});
  for (const char* word : {"true", "false", "null"}) g_.add_alternative(value, g_.literal(word));
  return Grammar::ref(value);
}

Element JsonSchemaCompiler::value(const ojson& schema, const std::string& path) {
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) unsupported(path, "the schema false (no value is valid)");
    return any_value();
  }
  if (!schema.is_object()) throw UnsupportedSchema("JSON Schema at " + path + " must be an object or a boolean");
  if (depth_ >= 64) unsupported(path, "nesting deeper than 64 schemas");
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(x) { ++d; }
    ~Depth() { --d; }
  } guard(depth_);

  for (const auto& [k, v] : schema.items())
    if (kUnsupported.count(k)) unsupported(path, "'" + k + "'");
  if (const ojson* u = find(schema, "uniqueItems"); u && u->is_boolean() && u->get<bool>() &&
                                                   count_field(schema, "maxItems", 2, path) > 1)
    unsupported(path, "'uniqueItems'");

  if (const ojson* ref = find(schema, "$ref")) {
    if (!ref->is_string()) throw UnsupportedSchema("JSON Schema: '$ref' at " + path + " must be a string");
    expect_alone(schema, "$ref", path);
    return reference(ref->get<std::string>(), path);
  }
  if (const ojson* c = find(schema, "const")) return json_literal(*c);
  if (const ojson* e = find(schema, "enum")) {
    if (!e->is_array() || e->empty())
      throw UnsupportedSchema("JSON Schema: 'enum' at " + path + " must be a non-empty array");
    std::vector<Sequence> alts;
    for (const auto& item : *e) alts.push_back(g_.literal(item.dump()));
    return g_.choice(std::move(alts), "enum");
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const ojson* list = find(schema, key)) {
      if (!list->is_array() || list->empty())
        throw UnsupportedSchema("JSON Schema: '" + std::string(key) + "' at " + path + " must be a non-empty array");
      expect_alone(schema, key, path);
      std::vector<Sequence> alts;
      for (size_t i = 0; i < list->size(); ++i)
        alts.push_back({value((*list)[i], path + "/" + key + "/" + std::to_string(i))});
      return g_.choice(std::move(alts), key);
    }
  }
  if (const ojson* all = find(schema, "allOf")) {
    if (!all->is_array() || all->size() != 1) unsupported(path, "'allOf' of more than one schema");
    expect_alone(schema, "allOf", path);
    return value((*all)[0], path + "/allOf/0");
  }

  const ojson* type = find(schema, "type");
  if (type && type->is_string()) return typed(type->get<std::string>(), schema, path);
  if (type && type->is_array() && !type->empty()) {
    std::vector<Sequence> alts;
    for (const auto& t : *type) {
      if (!t.is_string()) throw UnsupportedSchema("JSON Schema: 'type' at " + path + " must name types");
      alts.push_back({typed(t.get<std::string>(), schema, path)});
    }
    return g_.choice(std::move(alts), "types");
  }
  if (type) throw UnsupportedSchema("JSON Schema: 'type' at " + path + " must be a string or a non-empty array");
  // No type: what the keywords imply, else any value.
  for (const char* k : {"properties", "required", "additionalProperties", "minProperties", "maxProperties"})
    if (find(schema, k)) return typed("object", schema, path);
  for (const char* k : {"items", "prefixItems", "minItems", "maxItems"})
    if (find(schema, k)) return typed("array", schema, path);
  for (const char* k : {"pattern", "format", "minLength", "maxLength"})
    if (find(schema, k)) return typed("string", schema, path);
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (find(schema, k)) return typed("number", schema, path);
  return any_value();
}

Element JsonSchemaCompiler::typed(const std::string& type, const ojson& schema, const std::string& path) {
  if (type == "string") return string_value(schema, path);
  if (type == "integer") return integer_value(schema, path);
  if (type == "number") return number_value(schema, path);
  if (type == "object") return object_value(schema, path);
  if (type == "array") return array_value(schema, path);
  if (type == "boolean") return g_.choice({g_.literal("true"), g_.literal("false")}, "boolean");
  if (type == "null") return g_.choice({g_.literal("null")}, "null");
  throw UnsupportedSchema("JSON Schema: unknown type '" + type + "' at " + path);
}

Element JsonSchemaCompiler::string_value(const ojson& schema, const std::string& path) {
  const ojson* pattern = find(schema, "pattern");
  const ojson* format = find(schema, "format");
  const bool lengths = find(schema, "minLength") || find(schema, "maxLength");
  const Element quote = g_.byte('"');
  if (pattern) {
    if (!pattern->is_string()) throw UnsupportedSchema("JSON Schema: 'pattern' at " + path + " must be a string");
    if (lengths || format) unsupported(path, "'pattern' together with 'minLength', 'maxLength' or 'format'");
    try {
      return g_.choice({{quote, regex_to_grammar(g_, pattern->get<std::string>()), quote}}, "pattern");
    } catch (const UnsupportedSchema&) {
      throw;
    } catch (const Error& e) {
      throw UnsupportedSchema(std::string("JSON Schema at ") + path + ": " + e.what());
    }
  }
  if (format && format->is_string()) {
    const std::string name = format->get<std::string>();
    for (const auto& [f, regex] : kFormats) {
      if (name != f) continue;
      if (lengths) unsupported(path, "'format' together with 'minLength' or 'maxLength'");
      return g_.choice({{quote, regex_to_grammar(g_, regex), quote}}, "format");
    }
    unsupported(path, "the format '" + name + "'");
  }
  const int64_t min = count_field(schema, "minLength", 0, path);
  const int64_t max = count_field(schema, "maxLength", -1, path);
  if (max >= 0 && max < min) unsupported(path, "maxLength below minLength");
  if (min == 0 && max < 0) return any_string();
  return g_.choice({{quote, g_.repeat({string_char(true)}, min, max), quote}}, "string");
}

Element JsonSchemaCompiler::integer_value(const ojson& schema, const std::string& path) {
  const auto [lo, hi] = integer_bounds(schema, path);
  if (lo > hi) unsupported(path, "an integer range with no integer in it");
  std::vector<Sequence> alts;
  if (hi >= 0) alts.push_back({natural_range(g_, std::max<int64_t>(lo, 0), hi)});
  if (lo < 0) {
    const int64_t most = lo == std::numeric_limits<int64_t>::min() ? kUnbounded : -lo;
    const int64_t least = hi >= 0 ? 1 : -hi;
    alts.push_back({g_.byte('-'), natural_range(g_, least, most)});
  }
  return g_.choice(std::move(alts), "integer");
}

Element JsonSchemaCompiler::number_value(const ojson& schema, const std::string& path) {
  ByteSet digit;
  for (int d = '0'; d <= '9'; ++d) digit.set(size_t(d));
  const Element fraction = g_.choice({{g_.byte('.'), g_.repeat({g_.bytes(digit)}, 1, 16)}}, "fraction");
  const bool bounded = find(schema, "minimum") || find(schema, "maximum") || find(schema, "exclusiveMinimum") ||
                       find(schema, "exclusiveMaximum");
  if (!bounded) {
    if (const auto it = shared_.find("number"); it != shared_.end()) return it->second;
    ByteSet e, sign;
    e.set('e');
    e.set('E');
    sign.set('+');
    sign.set('-');
    const Element exponent =
        g_.choice({{g_.bytes(e), g_.optional({g_.bytes(sign)}), g_.repeat({g_.bytes(digit)}, 1, 2)}}, "exponent");
    return shared_["number"] = g_.choice({{g_.optional({g_.byte('-')}), natural_range(g_, 0, kUnbounded),
                                           g_.optional({fraction}), g_.optional({exponent})}},
                                         "number");
  }
  // A subset of the range that needs no arithmetic on fractions: the
  // integers A..B the bounds allow, and i.fraction wherever [i, i+1) (or
  // (-(i+1), -i]) lies inside [A, B]. No exponents.
  const auto [lo, hi] = integer_bounds(schema, path);
  if (lo > hi) unsupported(path, "a number range with no integer in it");
  const bool no_low = lo == std::numeric_limits<int64_t>::min();
  std::vector<Sequence> alts;
  if (hi >= 0) {
    const int64_t a = std::max<int64_t>(lo, 0);
    if (hi == kUnbounded) {
      alts.push_back({natural_range(g_, a, kUnbounded), g_.optional({fraction})});
    } else {
      if (a <= hi - 1) alts.push_back({natural_range(g_, a, hi - 1), g_.optional({fraction})});
      alts.push_back(g_.literal(std::to_string(hi)));
    }
  }
  if (lo < 0) {
    // -m and -m.fraction: m.fraction needs m + 1 <= -lo and -m <= hi.
    const int64_t least_whole = hi >= 0 ? 1 : -hi, least_fraction = hi >= 0 ? 0 : -hi;
    const int64_t most_whole = no_low ? kUnbounded : -lo, most_fraction = no_low ? kUnbounded : -lo - 1;
    if (least_whole <= most_whole) alts.push_back({g_.byte('-'), natural_range(g_, least_whole, most_whole)});
    if (least_fraction <= most_fraction)
      alts.push_back({g_.byte('-'), natural_range(g_, least_fraction, most_fraction), fraction});
  }
  return g_.choice(std::move(alts), "number");
}

Element JsonSchemaCompiler::object_value(const ojson& schema, const std::string& path) {
  const ojson* properties = find(schema, "properties");
  if (properties && !properties->is_object())
    throw UnsupportedSchema("JSON Schema: 'properties' at " + path + " must be an object");
  const ojson* additional = find(schema, "additionalProperties");
  const bool closed = additional && additional->is_boolean() && !additional->get<bool>();
  std::vector<std::pair<std::string, const ojson*>> members;
  if (properties)
    for (const auto& [name, sub] : properties->items()) members.emplace_back(name, &sub);
  std::set<std::string> required;
  if (const ojson* r = find(schema, "required")) {
    if (!r->is_array()) throw UnsupportedSchema("JSON Schema: 'required' at " + path + " must be an array");
    for (const auto& name : *r) {
      if (!name.is_string()) throw UnsupportedSchema("JSON Schema: 'required' at " + path + " must list names");
      required.insert(name.get<std::string>());
    }
  }
  static const ojson kAny = true;
  for (const std::string& name : required) {
    const bool listed = std::any_of(members.begin(), members.end(), [&](const auto& m) { return m.first == name; });
    if (listed) continue;
    if (closed) unsupported(path, "'required' naming '" + name + "', which additionalProperties: false forbids");
    members.emplace_back(name, additional && additional->is_object() ? additional : &kAny);
  }
  const int64_t min_props = count_field(schema, "minProperties", 0, path);
  const int64_t max_props = count_field(schema, "maxProperties", -1, path);
  const Element ws = whitespace();
  const Element open = g_.byte('{'), close = g_.byte('}'), comma = g_.byte(','), colon = g_.byte(':');

  if (members.empty()) {
    if (closed || max_props == 0) {
      if (min_props > 0) unsupported(path, "minProperties on an object that allows no properties");
      return g_.choice({{open, ws, close}}, "object");
    }
    // A map: any keys, values under additionalProperties.
    const ojson& values = additional ? *additional : kAny;
    const Element member = g_.choice({{any_string(), ws, colon, ws, value(values, path + "/additionalProperties")}},
                                     "member");
    const int64_t more_min = std::max<int64_t>(min_props - 1, 0), more_max = max_props < 0 ? -1 : max_props - 1;
    Sequence filled = {open, ws, member, g_.repeat({ws, comma, ws, member}, more_min, more_max), ws, close};
    if (min_props > 0) return g_.choice({std::move(filled)}, "map");
    return g_.choice({{open, ws, close}, std::move(filled)}, "map");
  }
  if (min_props > int64_t(required.size())) unsupported(path, "minProperties beyond the required properties");
  if (max_props >= 0 && max_props < int64_t(members.size())) unsupported(path, "maxProperties below the properties");

  const size_t n = members.size();
  std::vector<Element> member(n);
  for (size_t i = 0; i < n; ++i) {
    Sequence s = string_literal(members[i].first);
    s.insert(s.end(), {ws, colon, ws, value(*members[i].second, path + "/properties/" + members[i].first)});
    member[i] = g_.choice({std::move(s)}, "property");
  }
  auto is_required = [&](size_t i) { return required.count(members[i].first) > 0; };
  // after[i]: what may follow member i (members i+1.., each behind a comma).
  std::vector<Element> after(n);
  after[n - 1] = g_.choice({{}}, "end");
  for (size_t i = n - 1; i-- > 0;) {
    Sequence next = {ws, comma, ws, member[i + 1], after[i + 1]};
    after[i] = is_required(i + 1) ? g_.choice({std::move(next)}, "members")
                                  : g_.choice({std::move(next), {after[i + 1]}}, "members");
  }
  // first[i]: the members from i on, the first emitted without a comma.
  Element first = g_.choice({{}}, "end");
  for (size_t i = n; i-- > 0;) {
    Sequence take = {member[i], after[i]};
    first = is_required(i) ? g_.choice({std::move(take)}, "members") : g_.choice({std::move(take), {first}}, "members");
  }
  return g_.choice({{open, ws, first, ws, close}}, "object");
}

Element JsonSchemaCompiler::array_value(const ojson& schema, const std::string& path) {
  std::vector<const ojson*> prefix;
  const ojson* items = find(schema, "items");
  const ojson* prefix_items = find(schema, "prefixItems");
  if (prefix_items) {
    if (!prefix_items->is_array()) throw UnsupportedSchema("JSON Schema: 'prefixItems' at " + path + " must be an array");
    for (const auto& p : *prefix_items) prefix.push_back(&p);
  } else if (items && items->is_array()) {  // draft 4's tuple form
    for (const auto& p : *items) prefix.push_back(&p);
    items = nullptr;
  }
  static const ojson kAny = true;
  const bool rest_allowed = !(items && items->is_boolean() && !items->get<bool>());
  const ojson& rest = items ? *items : kAny;
  const int64_t min = count_field(schema, "minItems", 0, path);
  int64_t max = count_field(schema, "maxItems", -1, path);
  if (max >= 0 && max < min) unsupported(path, "maxItems below minItems");
  if (!rest_allowed) {
    if (min > int64_t(prefix.size())) unsupported(path, "minItems beyond the tuple's items");
    max = max < 0 ? int64_t(prefix.size()) : std::min<int64_t>(max, int64_t(prefix.size()));
  }
  const Element ws = whitespace();
  const Element open = g_.byte('['), close = g_.byte(']'), comma = g_.byte(',');
  if (max == 0) return g_.choice({{open, ws, close}}, "array");

  std::vector<Element> item_at(prefix.size());
  for (size_t k = 0; k < prefix.size(); ++k)
    item_at[k] = value(*prefix[k], path + "/prefixItems/" + std::to_string(k));
  std::optional<Element> rest_item;
  auto rest_element = [&]() {
    if (!rest_item) rest_item = value(rest, path + "/items");
    return *rest_item;
  };
  const auto p = int64_t(prefix.size());
  // tail(k): items k.. (k >= 1), each behind a comma.
  Element tail;
  if (max >= 0 && max <= p) {
    tail = g_.choice({{}}, "end");
  } else if (rest_allowed) {
    const int64_t k = std::max<int64_t>(p, 1);
    tail = g_.repeat({ws, comma, ws, rest_element()}, std::max<int64_t>(min - k, 0), max < 0 ? -1 : max - k);
  } else {
    tail = g_.choice({{}}, "end");
  }
  for (int64_t k = std::min<int64_t>(p, max < 0 ? p : max) - 1; k >= 1; --k) {
    Sequence next = {ws, comma, ws, item_at[size_t(k)], tail};
    tail = k < min ? g_.choice({std::move(next)}, "items") : g_.choice({std::move(next), {}}, "items");
  }
  const Element first_item = p > 0 ? item_at[0] : rest_element();
  Sequence filled = {open, ws, first_item, tail, ws, close};
  if (min > 0) return g_.choice({std::move(filled)}, "array");
  return g_.choice({{open, ws, close}, std::move(filled)}, "array");
}

Element JsonSchemaCompiler::reference(const std::string& ref, const std::string& path) {
  if (const auto it = refs_.find(ref); it != refs_.end()) return Grammar::ref(it->second);
  if (ref.empty() || ref[0] != '#') unsupported(path, "'$ref' to another document (" + ref + ")");
  const ojson* target = &root_;
  std::string pointer = ref.substr(1);
  size_t pos = 0;
  while (pos < pointer.size()) {
    if (pointer[pos] != '/') unsupported(path, "the '$ref' " + ref + " (only JSON pointers)");
    size_t end = pointer.find('/', pos + 1);
    if (end == std::string::npos) end = pointer.size();
    std::string token = pointer.substr(pos + 1, end - pos - 1);
    for (size_t i = 0; (i = token.find('~', i)) != std::string::npos; ++i)
      token.replace(i, 2, token.compare(i, 2, "~1") == 0 ? "/" : "~");
    if (target->is_object() && target->contains(token)) {
      target = &(*target)[token];
    } else if (target->is_array() && !token.empty() && std::all_of(token.begin(), token.end(), ::isdigit) &&
               std::stoul(token) < target->size()) {
      target = &(*target)[std::stoul(token)];
    } else {
      throw UnsupportedSchema("JSON Schema: the '$ref' " + ref + " at " + path + " points at nothing");
    }
    pos = end;
  }
  const uint32_t rule = g_.add_rule("ref");
  refs_[ref] = rule;
  g_.add_alternative(rule, {value(*target, ref)});
  return Grammar::ref(rule);
}

Grammar json_schema_grammar(const ojson& schema) {
  Grammar g;
  JsonSchemaCompiler compiler(g, schema);
  const Element body = compiler.value(schema);
  const uint32_t root = g.add_rule("root");
  g.add_alternative(root, {compiler.whitespace(), body});
  g.set_root(root);
  return g;
}

}  // namespace fathom::grammar
