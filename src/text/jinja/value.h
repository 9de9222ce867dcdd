#pragma once
// The values a Jinja template computes with, modelled on the Python objects
// Jinja2 sees when transformers renders a chat template: undefined (distinct
// from none), bool, int, float, str, list/tuple, dict (insertion-ordered),
// one-shot generators (what select/map/... return), and objects (namespace,
// loop, callables). Lists and dicts are immutable once built (the sandbox
// transformers uses forbids mutating them), so copies share storage.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/jinja/budget.h"

namespace fathom::jinja {

class Value;
class Dict;
class Interpreter;
struct CallArgs;

using ValueList = std::vector<Value>;

// Python sequence types that share list storage; they differ in repr, JSON
// serializability, subscripting and equality.
enum class SeqKind : uint8_t { List, Tuple, DictKeys, DictValues, DictItems, Range };

// Containers nest at most this deep (Python would hit its recursion limit
// printing or serializing deeper ones); it also bounds every recursion here.
constexpr uint32_t kMaxNesting = 500;

struct ListData {
  ValueList items;
  uint32_t depth = 1;
  SeqKind kind = SeqKind::List;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // for SeqKind::Range
};

// A Python generator: iterating it consumes it, it is always truthy and has no len().
// Its items are computed eagerly; `position` is how far it has been consumed.
struct GeneratorData {
  ValueList items;
  uint32_t depth = 1;
  size_t position = 0;
};

// Namespace, loop context, functions, macros: anything with attributes or a call.
class Object {
 public:
  virtual ~Object() = default;
  // Python's type name, as in "'dict object' has no attribute 'x'".
  virtual std::string type_name() const = 0;
  // Undefined when there is no such attribute.
  virtual Value get_attr(const std::string& name) const;
  virtual bool is_callable() const { return false; }
  virtual Value call(Interpreter& interp, CallArgs& args) const;
  // Python str(); objects whose str() Python prints with a memory address fail instead.
  virtual std::string to_str() const;
  // How deeply the values this object holds nest (as Value::nesting), so that chains
  // through objects are bounded by kMaxNesting like chains of containers.
  virtual uint32_t nesting() const { return 0; }
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Generator, Object };

  Value() : v_(UndefinedV{}) {}
  Value(bool b) : v_(b) {}  // NOLINT: implicit on purpose, as for the other scalars
  template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  Value(T i) : v_(int64_t(i)) {}  // NOLINT
  Value(double f) : v_(f) {}  // NOLINT
  Value(std::string s) : v_(StrV{std::move(s), false}) {}  // NOLINT
  Value(std::string_view s) : v_(StrV{std::string(s), false}) {}  // NOLINT
  Value(const char* s) : v_(StrV{std::string(s), false}) {}  // NOLINT
  // markupsafe.Markup: a str that escapes what is added to it (what |safe and |escape return).
  static Value markup(std::string s) { return Value(StrV{std::move(s), true}); }

  // `hint` is the message raised when the undefined value is used, e.g. "'x' is undefined".
  static Value undefined(std::string hint = "value is undefined") { return Value(UndefinedV{std::move(hint)}); }
  static Value none() { return Value(NoneV{}); }
  static Value list(ValueList items, bool is_tuple = false);
  static Value sequence(ValueList items, SeqKind kind);
  static Value range(int64_t start, int64_t stop, int64_t step);
  static Value dict(Dict d);
  static Value generator(ValueList items);
  static Value object(std::shared_ptr<Object> o) { return Value(std::move(o)); }

  Kind kind() const { return Kind(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  // int, float or bool: Python's numbers.Number.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_tuple() const { return is_list() && list_data().kind == SeqKind::Tuple; }
  // Any sequence kind; is_plain_list() only for Python lists.
  bool is_plain_list() const { return is_list() && list_data().kind == SeqKind::List; }
  SeqKind seq_kind() const { return list_data().kind; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_generator() const { return kind() == Kind::Generator; }
  bool is_object() const { return kind() == Kind::Object; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<StrV>(v_).s; }
  bool is_markup() const { return is_string() && std::get<StrV>(v_).markup; }
  const std::string& undefined_hint() const { return std::get<UndefinedV>(v_).hint; }
  const ListData& list_data() const { return *std::get<std::shared_ptr<const ListData>>(v_); }
  const ValueList& items() const { return list_data().items; }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(v_); }
  GeneratorData& generator_data() const { return *std::get<std::shared_ptr<GeneratorData>>(v_); }
  const std::shared_ptr<Object>& as_object() const { return std::get<std::shared_ptr<Object>>(v_); }

  // Python truthiness (a generator is always true, undefined is false).
  bool truthy() const;
  // int/bool as a C++ integer, float as double (for arithmetic on mixed numbers).
  double number_as_double() const;

  // Python's type name: 'NoneType', 'int', 'str', 'dict', ..., 'Undefined' for undefined.
  std::string type_name() const;

  // JSON conversion: objects keep their key order; null → none; no undefined on input.
  static Value from_json(const nlohmann::ordered_json& j);
  // Fails on values that have no JSON form (undefined, generators, callables).
  nlohmann::ordered_json to_json() const;

  // How deeply containers nest inside this value (0 for scalars and objects).
  uint32_t nesting() const;

  // Identity for Python `is` (sameas): scalars by value, containers by storage.
  bool same_object(const Value& other) const;

 private:
  struct UndefinedV {
    std::string hint;
  };
  struct NoneV {};
  // Building or copying a string is charged to the active rendering's step budget
  // (budget.h), so copying a big string in a loop is work the budget sees.
  struct StrV {
    StrV(std::string str, bool is_markup) : s(std::move(str)), markup(is_markup) { charge_bytes(s.size()); }
    StrV(const StrV& o) : s(o.s), markup(o.markup) { charge_bytes(s.size()); }
    StrV(StrV&&) noexcept = default;
    StrV& operator=(const StrV& o) {
      s = o.s;
      markup = o.markup;
      charge_bytes(s.size());
      return *this;
    }
    StrV& operator=(StrV&&) noexcept = default;
    ~StrV() = default;
    std::string s;
    bool markup;
  };
  using Storage = std::variant<UndefinedV, NoneV, bool, int64_t, double, StrV, std::shared_ptr<const ListData>,
                               std::shared_ptr<const Dict>, std::shared_ptr<GeneratorData>, std::shared_ptr<Object>>;
  explicit Value(UndefinedV u) : v_(std::move(u)) {}
  explicit Value(NoneV n) : v_(n) {}
  explicit Value(StrV s) : v_(std::move(s)) {}
  explicit Value(std::shared_ptr<const ListData> l) : v_(std::move(l)) {}
  explicit Value(std::shared_ptr<const Dict> d) : v_(std::move(d)) {}
  explicit Value(std::shared_ptr<GeneratorData> g) : v_(std::move(g)) {}
  explicit Value(std::shared_ptr<Object> o) : v_(std::move(o)) {}

  Storage v_;
};

// Insertion-ordered mapping with Python key equality (1 == 1.0 == True).
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts, or replaces the value in place (Python keeps the first insertion position).
  void set(const Value& key, Value value);
  bool contains(const Value& key) const { return find(key) != nullptr; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  uint32_t depth() const { return depth_; }

 private:
  std::vector<std::pair<Value, Value>> items_;
  uint32_t depth_ = 1;
  std::unordered_map<std::string, size_t> string_index_;
};

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// Python `==` (1 == 1.0, True == 1, [1] != (1,), undefined == undefined).
bool values_equal(const Value& a, const Value& b);

// Hashable key used by unique/groupby; strings and numbers are hashable, containers are not.
bool value_hashable(const Value& v);

}  // namespace fathom::jinja
