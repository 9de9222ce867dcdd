// Statements, and the objects whose behaviour is tied to them (macros, loops, namespaces).
#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"
#include "text/jinja/pyformat.h"

namespace fathom::jinja {

void render_body(const Body& body, Interpreter& in, std::string& out) {
  for (const auto& stmt : body) {
    stmt->render(in, out);
    in.budget.check_output_size(out.size());
    if (in.flow != Interpreter::Flow::Normal) return;
  }
}

void Stmt::render(Interpreter& in, std::string& out) const {
  try {
    in.budget.step();
    DepthScope depth(in.budget);
    do_render(in, out);
  } catch (const EvalError& e) {
    throw TemplateError(e.kind(), in.template_name(), pos, e.what());
  }
}

void Target::assign(Interpreter& in, const Value& v) const {
  switch (kind) {
    case Kind::Name: in.assign(name, v); return;
    case Kind::NamespaceAttr: {
      const Value ns = in.lookup(name);
      auto* obj = ns.is_object() ? dynamic_cast<NamespaceObject*>(ns.as_object().get()) : nullptr;
      if (!obj) eval_fail("can not assign attribute on non-namespace object ('", name, "' is ", ns.type_name(), ")");
      obj->set_attr(attr, v);
      return;
    }
    case Kind::Tuple: {
      const ValueList values = iterate(v);
      if (values.size() != items.size()) {
        if (values.size() > items.size()) eval_fail("too many values to unpack (expected ", items.size(), ")");
        eval_fail("not enough values to unpack (expected ", items.size(), ", got ", values.size(), ")");
      }
      for (size_t i = 0; i < items.size(); ++i) items[i].assign(in, values[i]);
      return;
    }
  }
}

void OutputStmt::do_render(Interpreter& in, std::string& out) const { out += py_str(expr->eval(in)); }

void IfStmt::do_render(Interpreter& in, std::string& out) const {
  for (const auto& [test, body] : branches) {
    if (test->eval(in).truthy()) {
      render_body(body, in, out);
      return;
    }
  }
  render_body(else_body, in, out);
}

void ForStmt::do_render(Interpreter& in, std::string& out) const { run(in, iter->eval(in), 0, out); }

void ForStmt::run(Interpreter& in, const Value& iterable, int depth0, std::string& out) const {
  ValueList all = iterate(iterable);
  auto items = std::make_shared<ValueList>();
  if (filter) {
    for (auto& item : all) {
      Interpreter::ScopeGuard scope(in, in.child_frame());
      target.assign(in, item);
      if (filter->eval(in).truthy()) items->push_back(std::move(item));
    }
  } else {
    *items = std::move(all);
  }
  if (items->empty()) {
    Interpreter::ScopeGuard scope(in, in.child_frame());
    render_body(else_body, in, out);
    return;
  }
  auto loop = std::make_shared<LoopObject>(items, depth0, recursive ? this : nullptr);
  const Value loop_value = Value::object(loop);
  ++in.loop_depth;
  for (size_t i = 0; i < items->size(); ++i) {
    in.budget.step();
    Interpreter::ScopeGuard scope(in, in.child_frame());
    loop->set_index(i);
    in.assign("loop", loop_value);
    target.assign(in, (*items)[i]);
    render_body(body, in, out);
    if (in.flow == Interpreter::Flow::Break) {
      in.flow = Interpreter::Flow::Normal;
      break;
    }
    in.flow = Interpreter::Flow::Normal;
  }
  --in.loop_depth;
}

void SetStmt::do_render(Interpreter& in, std::string&) const { target.assign(in, value->eval(in)); }

void SetBlockStmt::do_render(Interpreter& in, std::string&) const {
  std::string captured;
  render_body(body, in, captured);
  Value v(std::move(captured));
  if (filter) v = filter->apply(in, v);
  target.assign(in, v);
}

void MacroStmt::do_render(Interpreter& in, std::string&) const {
  in.assign(name, Value::object(std::make_shared<MacroObject>(this, in.frame())));
}

void CallBlockStmt::do_render(Interpreter& in, std::string& out) const {
  const Value fn = call->callee->eval(in);
  CallArgs args = call->args.eval(in);
  args.keywords.emplace_back("caller", Value::object(std::make_shared<MacroObject>(caller.get(), in.frame())));
  try {
    out += py_str(call_value(in, fn, args));
  } catch (const EvalError& e) {
    throw TemplateError(e.kind(), in.template_name(), call->pos, e.what());
  }
}

void FilterBlockStmt::do_render(Interpreter& in, std::string& out) const {
  std::string captured;
  {
    Interpreter::ScopeGuard scope(in, in.child_frame());
    render_body(body, in, captured);
  }
  out += py_str(filter->apply(in, Value(std::move(captured))));
}

void WithStmt::do_render(Interpreter& in, std::string& out) const {
  std::vector<Value> values;
  for (const auto& [target, expr] : assignments) values.push_back(expr->eval(in));
  Interpreter::ScopeGuard scope(in, in.child_frame());
  for (size_t i = 0; i < assignments.size(); ++i) assignments[i].first.assign(in, values[i]);
  render_body(body, in, out);
}

void LoopControlStmt::do_render(Interpreter& in, std::string&) const {
  in.flow = is_break ? Interpreter::Flow::Break : Interpreter::Flow::Continue;
}

void ScopeStmt::do_render(Interpreter& in, std::string& out) const {
  if (!new_scope) return render_body(body, in, out);
  Interpreter::ScopeGuard scope(in, in.child_frame());
  render_body(body, in, out);
}

// ---- objects ----

Value NamespaceObject::get_attr(const std::string& name) const {
  if (const Value* v = attrs_.find(std::string_view(name))) return *v;
  return Object::get_attr(name);
}

std::string NamespaceObject::to_str() const { return "<Namespace " + py_repr(Value::dict(attrs_)) + ">"; }

Value BoundMethod::call(Interpreter& in, CallArgs& args) const { return call_method(in, receiver_, name_, args); }

Value MacroObject::get_attr(const std::string& name) const {
  if (name == "name") return Value(def_->name);
  if (name == "arguments") {
    ValueList names;
    for (const auto& p : def_->params) names.push_back(Value(p.name));
    return Value::list(std::move(names), true);
  }
  if (name == "caller") return Value(def_->uses_caller);
  if (name == "catch_kwargs") return Value(def_->uses_kwargs);
  if (name == "catch_varargs") return Value(def_->uses_varargs);
  return Object::get_attr(name);
}

Value MacroObject::call(Interpreter& in, CallArgs& args) const {
  if (in.call_depth >= Interpreter::kMaxCallDepth)
    eval_fail("maximum recursion depth exceeded in macro '", def_->name, "'");
  struct DepthGuard {
    Interpreter& in;
    ~DepthGuard() { --in.call_depth; }
  } depth_guard{in};
  ++in.call_depth;

  const auto& params = def_->params;
  auto frame = in.new_frame(closure_);
  Interpreter::ScopeGuard scope(in, frame);
  const size_t n_positional = std::min(args.positional.size(), params.size());
  for (size_t i = 0; i < n_positional; ++i) frame->set(params[i].name, args.positional[i]);
  auto take_keyword = [&](const std::string& name, Value* out) {
    for (auto it = args.keywords.begin(); it != args.keywords.end(); ++it) {
      if (it->first == name) {
        *out = std::move(it->second);
        args.keywords.erase(it);
        return true;
      }
    }
    return false;
  };
  for (size_t i = n_positional; i < params.size(); ++i) {
    Value v;
    if (take_keyword(params[i].name, &v)) frame->set(params[i].name, std::move(v));
    else if (params[i].default_value) frame->set(params[i].name, params[i].default_value->eval(in));
    else frame->set(params[i].name, Value::undefined("parameter '" + params[i].name + "' was not provided"));
  }
  if (def_->uses_caller) {
    Value caller;
    if (!take_keyword("caller", &caller)) caller = Value::undefined("No caller defined");
    frame->set("caller", caller);
  }
  if (def_->uses_kwargs) {
    Dict kw;
    for (auto& [k, v] : args.keywords) kw.set(Value(k), v);
    frame->set("kwargs", Value::dict(std::move(kw)));
  } else if (!args.keywords.empty()) {
    if (args.keywords.front().first == "caller")
      eval_fail("macro '", def_->name, "' was invoked with two values for the special caller argument");
    eval_fail("macro '", def_->name, "' takes no keyword argument '", args.keywords.front().first, "'");
  }
  if (def_->uses_varargs) {
    ValueList rest;
    for (size_t i = params.size(); i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    frame->set("varargs", Value::list(std::move(rest), true));
  } else if (args.positional.size() > params.size()) {
    eval_fail("macro '", def_->name, "' takes not more than ", params.size(), " argument(s)");
  }
  std::string out;
  const int saved_loop_depth = in.loop_depth;
  render_body(def_->body, in, out);
  in.flow = Interpreter::Flow::Normal;
  in.loop_depth = saved_loop_depth;
  return Value(std::move(out));
}

Value LoopObject::get_attr(const std::string& name) const {
  const size_t n = items_->size();
  if (name == "index") return Value(int64_t(index0_ + 1));
  if (name == "index0") return Value(int64_t(index0_));
  if (name == "revindex") return Value(int64_t(n - index0_));
  if (name == "revindex0") return Value(int64_t(n - index0_ - 1));
  if (name == "first") return Value(index0_ == 0);
  if (name == "last") return Value(index0_ + 1 == n);
  if (name == "length") return Value(int64_t(n));
  if (name == "depth") return Value(int64_t(depth0_ + 1));
  if (name == "depth0") return Value(int64_t(depth0_));
  if (name == "previtem")
    return index0_ == 0 ? Value::undefined("there is no previous item") : (*items_)[index0_ - 1];
  if (name == "nextitem")
    return index0_ + 1 >= n ? Value::undefined("there is no next item") : (*items_)[index0_ + 1];
  if (name == "cycle") {
    auto self = std::static_pointer_cast<const LoopObject>(shared_from_this());
    return Value::object(std::make_shared<BuiltinFunction>("cycle", [self](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) eval_fail("no items for cycling given");
      return a.positional[self->index0_ % a.positional.size()];
    }, nesting()));
  }
  if (name == "changed") {
    auto self = std::static_pointer_cast<const LoopObject>(shared_from_this());
    return Value::object(std::make_shared<BuiltinFunction>("changed", [self](Interpreter&, CallArgs& a) {
      const Value current = Value::list(a.positional, true);
      if (self->last_changed_ && values_equal(*self->last_changed_, current)) return Value(false);
      self->last_changed_ = current;
      return Value(true);
    }, nesting()));
  }
  return Object::get_attr(name);
}

Value LoopObject::call(Interpreter& in, CallArgs& args) const {
  if (!recursive_loop_) eval_fail("The loop must have the 'recursive' marker to be called recursively.");
  if (args.positional.size() != 1 || !args.keywords.empty()) eval_fail("loop() takes exactly one argument");
  if (in.call_depth >= Interpreter::kMaxCallDepth) eval_fail("maximum recursion depth exceeded in a recursive loop");
  ++in.call_depth;
  std::string out;
  try {
    recursive_loop_->run(in, args.positional[0], depth0_ + 1, out);
  } catch (...) {
    --in.call_depth;
    throw;
  }
  --in.call_depth;
  return Value(std::move(out));
}

std::string LoopObject::to_str() const {
  return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(items_->size()) + ">";
}

}  // namespace fathom::jinja
