#include "text/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "text/jinja/diagnostics.h"
#include "text/jinja/pyformat.h"

namespace fathom::jinja {

Value Object::get_attr(const std::string& name) const {
  return Value::undefined("'" + type_name() + " object' has no attribute '" + name + "'");
}

Value Object::call(Interpreter&, CallArgs&) const { eval_fail("'", type_name(), "' object is not callable"); }

std::string Object::to_str() const {
  unsupported("printing a '", type_name(), "' object (Python would print its memory address)");
}

Value Value::list(ValueList items, bool is_tuple) {
  return sequence(std::move(items), is_tuple ? SeqKind::Tuple : SeqKind::List);
}

namespace {
uint32_t nesting_of(const ValueList& items) {
  uint32_t depth = 1;
  for (const auto& v : items) depth = std::max(depth, v.nesting() + 1);
  if (depth > kMaxNesting) eval_fail("containers nested deeper than ", kMaxNesting, " levels");
  return depth;
}
}  // namespace

uint32_t Value::nesting() const {
  switch (kind()) {
    case Kind::List: return list_data().depth;
    case Kind::Dict: return as_dict().depth();
    case Kind::Generator: return generator_data().depth;
    case Kind::Object: return as_object()->nesting();
    default: return 0;
  }
}

Value Value::sequence(ValueList items, SeqKind kind) {
  charge_steps(items.size());
  check_value_size(items.size() * sizeof(Value), "a list");
  auto data = std::make_shared<ListData>();
  data->depth = nesting_of(items);
  data->items = std::move(items);
  data->kind = kind;
  return Value(std::shared_ptr<const ListData>(std::move(data)));
}

Value Value::range(int64_t start, int64_t stop, int64_t step) {
  auto data = std::make_shared<ListData>();
  data->kind = SeqKind::Range;
  data->range_start = start;
  data->range_stop = stop;
  data->range_step = step;
  // Counted in 128 bits: start, stop and step may be anywhere in int64.
  const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
  const __int128 stride = step > 0 ? __int128(step) : -__int128(step);
  const __int128 count = span > 0 ? (span + stride - 1) / stride : 0;
  check_value_size(size_t(std::min<__int128>(count, INT64_MAX / int64_t(sizeof(Value)))) * sizeof(Value), "a range");
  ValueList items;
  items.reserve(size_t(count));
  for (__int128 k = 0; k < count; ++k) items.emplace_back(int64_t(start + k * __int128(step)));
  charge_steps(items.size());
  data->items = std::move(items);
  return Value(std::shared_ptr<const ListData>(std::move(data)));
}

Value Value::dict(Dict d) { return Value(std::shared_ptr<const Dict>(std::make_shared<Dict>(std::move(d)))); }

Value Value::generator(ValueList items) {
  charge_steps(items.size());
  auto data = std::make_shared<GeneratorData>();
  data->depth = nesting_of(items);
  data->items = std::move(items);
  return Value(std::move(data));
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_float() != 0.0;
    case Kind::String: return !as_string().empty();
    case Kind::List: return !items().empty();
    case Kind::Dict: return !as_dict().empty();
    case Kind::Generator:
    case Kind::Object: return true;
  }
  return false;
}

double Value::number_as_double() const {
  if (is_float()) return as_float();
  if (is_int()) return double(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  eval_fail("expected a number, got '", type_name(), "'");
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return is_markup() ? "Markup" : "str";
    case Kind::List:
      switch (seq_kind()) {
        case SeqKind::List: return "list";
        case SeqKind::Tuple: return "tuple";
        case SeqKind::DictKeys: return "dict_keys";
        case SeqKind::DictValues: return "dict_values";
        case SeqKind::DictItems: return "dict_items";
        case SeqKind::Range: return "range";
      }
      return "list";
    case Kind::Dict: return "dict";
    case Kind::Generator: return "generator";
    case Kind::Object: return as_object()->type_name();
  }
  return "?";
}

namespace {
Value from_json_at(const nlohmann::ordered_json& j, uint32_t depth);
}

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

namespace {
Value from_json_at(const nlohmann::ordered_json& j, uint32_t depth) {
  if (depth >= kMaxNesting) eval_fail("JSON nested deeper than ", kMaxNesting, " levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) eval_fail("integer ", u, " is too large (fathom's Jinja integers are 64-bit)");
      return Value(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.set(Value(k), from_json_at(v, depth + 1));
      return Value::dict(std::move(d));
    }
    default: eval_fail("unsupported JSON value (binary or discarded)");
  }
}
}  // namespace

nlohmann::ordered_json Value::to_json() const {
  switch (kind()) {
    case Kind::None: return nullptr;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int();
    case Kind::Float: return as_float();
    case Kind::String: return as_string();
    case Kind::List: {
      if (seq_kind() != SeqKind::List && seq_kind() != SeqKind::Tuple)
        eval_fail("a '", type_name(), "' value has no JSON form");
      auto arr = nlohmann::ordered_json::array();
      for (const auto& e : items()) arr.push_back(e.to_json());
      return arr;
    }
    case Kind::Dict: {
      auto obj = nlohmann::ordered_json::object();
      for (const auto& [k, v] : as_dict().items()) obj[k.is_string() ? k.as_string() : py_str(k)] = v.to_json();
      return obj;
    }
    default: eval_fail("a '", type_name(), "' value has no JSON form");
  }
}

bool Value::same_object(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::Bool: return as_bool() == other.as_bool();
    case Kind::Int: return as_int() == other.as_int();
    case Kind::Float: return as_float() == other.as_float();
    case Kind::String: return as_string() == other.as_string();
    case Kind::List: return &list_data() == &other.list_data();
    case Kind::Dict: return &as_dict() == &other.as_dict();
    case Kind::Generator: return &generator_data() == &other.generator_data();
    case Kind::Object: return as_object() == other.as_object();
  }
  return false;
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number_as_double() == b.number_as_double();
    const int64_t x = a.is_bool() ? int64_t(a.as_bool()) : a.as_int();
    const int64_t y = b.is_bool() ? int64_t(b.as_bool()) : b.as_int();
    return x == y;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
      if (a.seq_kind() != b.seq_kind()) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case K::Dict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

bool value_hashable(const Value& v) {
  if (v.is_list()) {
    if (!v.is_tuple()) return false;
    for (const auto& e : v.items())
      if (!value_hashable(e)) return false;
    return true;
  }
  return !v.is_dict();
}

namespace {
// Dict keys equal under Python ==: 1, 1.0 and True are the same key.
bool keys_equal(const Value& a, const Value& b) { return values_equal(a, b); }
}  // namespace

const Value* Dict::find(std::string_view key) const {
  auto it = string_index_.find(std::string(key));
  return it == string_index_.end() ? nullptr : &items_[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items_)
    if (!k.is_string() && keys_equal(k, key)) return &v;
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  const uint32_t depth = std::max(key.nesting(), value.nesting()) + 1;
  if (depth > kMaxNesting) eval_fail("containers nested deeper than ", kMaxNesting, " levels");
  depth_ = std::max(depth_, depth);  // (replacing a value never lowers it: a safe upper bound)
  if (key.is_string()) {
    auto [it, inserted] = string_index_.try_emplace(key.as_string(), items_.size());
    if (inserted) items_.emplace_back(key, std::move(value));
    else items_[it->second].second = std::move(value);
    return;
  }
  if (!value_hashable(key)) eval_fail("unhashable type: '", key.type_name(), "'");
  for (auto& [k, v] : items_) {
    if (!k.is_string() && keys_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(key, std::move(value));
}

}  // namespace fathom::jinja
