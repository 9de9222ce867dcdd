#pragma once
// The Python objects a template can hold besides plain data: namespaces,
// loop contexts, macros, builtin functions and bound methods.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "text/jinja/diagnostics.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace fathom::jinja {

struct ForStmt;
struct MacroStmt;

// namespace(...): the one mutable object ({% set ns.x = ... %}); shared by reference.
class NamespaceObject : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  Value get_attr(const std::string& name) const override;
  std::string to_str() const override;
  uint32_t nesting() const override { return attrs_.empty() ? 0 : attrs_.depth(); }
  void set_attr(const std::string& name, Value v) { attrs_.set(Value(name), std::move(v)); }
  void clear() { attrs_ = Dict(); }

 private:
  Dict attrs_;
};

class BuiltinFunction : public Object {
 public:
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  // `nesting`: that of the values `fn` captures (loop.cycle holds its loop).
  BuiltinFunction(std::string name, Fn fn, uint32_t nesting = 0)
      : name_(std::move(name)), fn_(std::move(fn)), nesting_(nesting) {}
  uint32_t nesting() const override { return nesting_; }
  std::string type_name() const override { return "builtin_function_or_method"; }
  bool is_callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) const override { return fn_(in, args); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Fn fn_;
  uint32_t nesting_;
};

// receiver.method, e.g. message.content.startswith
class BoundMethod : public Object {
 public:
  BoundMethod(Value receiver, std::string name) : receiver_(std::move(receiver)), name_(std::move(name)) {
    if (receiver_.nesting() + 1 > kMaxNesting) eval_fail("containers nested deeper than ", kMaxNesting, " levels");
  }
  uint32_t nesting() const override { return receiver_.nesting() + 1; }
  std::string type_name() const override { return "builtin_function_or_method"; }
  bool is_callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) const override;

 private:
  Value receiver_;
  std::string name_;
};

class MacroObject : public Object {
 public:
  MacroObject(const MacroStmt* def, std::shared_ptr<Frame> closure, Value caller = Value::undefined())
      : def_(def), closure_(std::move(closure)), caller_(std::move(caller)) {}
  std::string type_name() const override { return "Macro"; }
  bool is_callable() const override { return true; }
  Value get_attr(const std::string& name) const override;
  Value call(Interpreter& in, CallArgs& args) const override;

 private:
  const MacroStmt* def_;
  std::shared_ptr<Frame> closure_;
  Value caller_;  // for {% call %}: the caller macro passed implicitly
};

// The `loop` variable of a for loop.
class LoopObject : public Object, public std::enable_shared_from_this<LoopObject> {
 public:
  LoopObject(std::shared_ptr<const ValueList> items, int depth0, const ForStmt* recursive_loop)
      : items_(std::move(items)), depth0_(depth0), recursive_loop_(recursive_loop) {
    for (const auto& v : *items_) nesting_ = std::max(nesting_, v.nesting() + 1);
    if (nesting_ > kMaxNesting) eval_fail("containers nested deeper than ", kMaxNesting, " levels");
  }
  uint32_t nesting() const override { return nesting_ + 1; }
  std::string type_name() const override { return "LoopContext"; }
  Value get_attr(const std::string& name) const override;
  bool is_callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) const override;
  std::string to_str() const override;
  void set_index(size_t i) { index0_ = i; }

 private:
  std::shared_ptr<const ValueList> items_;
  size_t index0_ = 0;
  int depth0_;
  const ForStmt* recursive_loop_;
  uint32_t nesting_ = 1;
  mutable std::optional<Value> last_changed_;
};

}  // namespace fathom::jinja
