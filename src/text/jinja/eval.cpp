// Expression evaluation and the interpreter's scope chain.
#include <algorithm>
#include <cmath>

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"
#include "text/jinja/pyformat.h"

namespace fathom::jinja {

// ---- interpreter ----

const Value* Frame::lookup(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent_.get()) {
    auto it = f->vars_.find(name);
    if (it != f->vars_.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::Interpreter(const std::string& template_name, const Dict& variables, std::function<std::time_t()> clock,
                         RenderBudget& budget)
    : budget(budget), template_name_(template_name), variables_(variables), clock_(std::move(clock)) {
  frame_ = new_frame(nullptr);
}

Interpreter::~Interpreter() {
  // Hold every frame and namespace still alive while clearing them: otherwise clearing
  // one would free the chain of objects only it holds, recursively.
  std::vector<std::shared_ptr<Frame>> frames;
  std::vector<std::shared_ptr<NamespaceObject>> namespaces;
  for (auto& weak : frames_)
    if (auto f = weak.lock()) frames.push_back(std::move(f));
  for (auto& weak : namespaces_)
    if (auto ns = weak.lock()) namespaces.push_back(std::move(ns));
  frame_.reset();
  for (auto& f : frames) f->clear();
  for (auto& ns : namespaces) ns->clear();
}

std::shared_ptr<Frame> Interpreter::new_frame(std::shared_ptr<Frame> parent) {
  auto f = std::make_shared<Frame>(std::move(parent));
  if (frames_.size() == frames_.capacity()) {  // drop the frames that are already gone
    frames_.erase(std::remove_if(frames_.begin(), frames_.end(), [](const auto& w) { return w.expired(); }),
                  frames_.end());
    frames_.reserve(std::max<size_t>(16, frames_.size() * 2));
  }
  frames_.push_back(f);
  return f;
}

Value Interpreter::lookup(const std::string& name) const {
  if (const Value* v = frame_->lookup(name)) return *v;
  if (const Value* v = variables_.find(std::string_view(name))) return *v;
  if (const Value* v = find_global(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

// ---- expressions ----

Value Expr::eval(Interpreter& in) const {
  try {
    in.budget.step();
    DepthScope depth(in.budget);
    return do_eval(in);
  } catch (const EvalError& e) {
    throw TemplateError(e.kind(), in.template_name(), pos, e.what());
  }
}

CallArgs CallArgExprs::eval(Interpreter& in) const {
  CallArgs a;
  a.positional.reserve(positional.size());
  for (const auto& e : positional) a.positional.push_back(e->eval(in));
  if (star_args) {
    for (auto& v : iterate(star_args->eval(in))) a.positional.push_back(std::move(v));
  }
  for (const auto& [k, e] : keywords) a.keywords.emplace_back(k, e->eval(in));
  if (star_kwargs) {
    const Value d = star_kwargs->eval(in);
    if (!d.is_dict()) eval_fail("argument after ** must be a mapping, not ", d.type_name());
    for (const auto& [k, v] : d.as_dict().items()) {
      if (!k.is_string()) eval_fail("keywords must be strings");
      a.keywords.emplace_back(k.as_string(), v);
    }
  }
  return a;
}

Value NameExpr::do_eval(Interpreter& in) const { return in.lookup(name); }

Value ListExpr::do_eval(Interpreter& in) const {
  ValueList values;
  values.reserve(items.size());
  for (const auto& e : items) values.push_back(e->eval(in));
  return Value::list(std::move(values), tuple);
}

Value DictExpr::do_eval(Interpreter& in) const {
  Dict d;
  for (const auto& [k, v] : items) {
    Value key = k->eval(in);
    d.set(key, v->eval(in));
  }
  return Value::dict(std::move(d));
}

Value GetAttrExpr::do_eval(Interpreter& in) const { return get_attr(object->eval(in), attr); }

Value SliceExpr::do_eval(Interpreter&) const { unsupported("a slice outside of a subscript"); }

Value GetItemExpr::do_eval(Interpreter& in) const {
  const Value obj = object->eval(in);
  if (const auto* s = dynamic_cast<const SliceExpr*>(key.get())) {
    auto bound = [&](const ExprPtr& e) { return e ? e->eval(in) : Value::none(); };
    const Value start = bound(s->start), stop = bound(s->stop), step = bound(s->step);
    return get_slice(obj, start, stop, step);
  }
  return get_item(obj, key->eval(in));
}

Value CallExpr::do_eval(Interpreter& in) const {
  // obj.method(...) on str/list/dict calls the method directly (no bound object).
  if (const auto* attr = dynamic_cast<const GetAttrExpr*>(callee.get())) {
    const Value receiver = attr->object->eval(in);
    if (receiver.is_string() || receiver.is_list() || receiver.is_dict()) {
      Value method;
      if (find_method(receiver, attr->attr, &method) && method.is_object()) {
        CallArgs a = args.eval(in);
        return call_method(in, receiver, attr->attr, a);
      }
    }
    const Value fn = get_attr(receiver, attr->attr);
    CallArgs a = args.eval(in);
    return call_value(in, fn, a);
  }
  const Value fn = callee->eval(in);
  CallArgs a = args.eval(in);
  return call_value(in, fn, a);
}

Value FilterExpr::do_eval(Interpreter& in) const {
  if (!fn) throw EvalError(missing.message, missing.kind);
  const Value v = input ? input->eval(in) : Value::undefined();
  CallArgs a = args.eval(in);
  return fn(in, v, a);
}

Value FilterExpr::apply(Interpreter& in, const Value& body) const {
  try {
    if (!fn) throw EvalError(missing.message, missing.kind);
    Value v = body;
    if (input) {
      const auto* inner = dynamic_cast<const FilterExpr*>(input.get());
      v = inner ? inner->apply(in, body) : input->eval(in);
    }
    CallArgs a = args.eval(in);
    return fn(in, v, a);
  } catch (const EvalError& e) {
    throw TemplateError(e.kind(), in.template_name(), pos, e.what());
  }
}

Value TestExpr::do_eval(Interpreter& in) const {
  if (!fn) throw EvalError(missing.message, missing.kind);
  const Value v = input->eval(in);
  CallArgs a = args.eval(in);
  return Value(fn(in, v, a));
}

Value UnaryExpr::do_eval(Interpreter& in) const {
  const Value v = operand->eval(in);
  switch (op) {
    case Op::Not: return Value(!v.truthy());
    case Op::Neg: return negate(v);
    case Op::Pos: return unary_plus(v);
  }
  return v;
}

Value BinaryExpr::do_eval(Interpreter& in) const {
  const Value l = left->eval(in);
  const Value r = right->eval(in);
  return binary_op(op, l, r);
}

Value ConcatExpr::do_eval(Interpreter& in) const {
  std::string out;
  for (const auto& p : parts) {
    const std::string s = py_str(p->eval(in));
    in.budget.check_value_size(out.size() + s.size(), "a string concatenation (~)");
    out += s;
  }
  return Value(std::move(out));
}

Value CompareExpr::do_eval(Interpreter& in) const {
  Value left = first->eval(in);
  for (const auto& [cop, e] : rest) {
    Value right = e->eval(in);
    if (!compare_values(cop, left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value AndExpr::do_eval(Interpreter& in) const {
  Value l = left->eval(in);
  if (!l.truthy()) return l;
  return right->eval(in);
}

Value OrExpr::do_eval(Interpreter& in) const {
  Value l = left->eval(in);
  if (l.truthy()) return l;
  return right->eval(in);
}

Value CondExpr::do_eval(Interpreter& in) const {
  if (test->eval(in).truthy()) return if_true->eval(in);
  if (if_false) return if_false->eval(in);
  return Value::undefined("the inline if-expression on line " + std::to_string(pos.line) +
                          " evaluated to false and no else section was defined.");
}

}  // namespace fathom::jinja
