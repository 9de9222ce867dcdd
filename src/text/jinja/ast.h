#pragma once
// The parsed template: expression nodes evaluate to Values, statement nodes
// append their output. Every node keeps its source position so that any error
// names the construct's line:column.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/builtins.h"
#include "text/jinja/diagnostics.h"
#include "text/jinja/value.h"

namespace fathom::jinja {

class Interpreter;

struct Node {
  SourcePos pos;
  virtual ~Node() = default;
};

struct Expr : Node {
  // Evaluates, turning a position-less EvalError from below into a TemplateError at this node.
  Value eval(Interpreter& in) const;

 protected:
  virtual Value do_eval(Interpreter& in) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

struct CallArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
  CallArgs eval(Interpreter& in) const;
};

struct ConstExpr : Expr {
  Value value;
  Value do_eval(Interpreter&) const override { return value; }
};

struct NameExpr : Expr {
  std::string name;
  Value do_eval(Interpreter& in) const override;
};

struct ListExpr : Expr {
  std::vector<ExprPtr> items;
  bool tuple = false;
  Value do_eval(Interpreter& in) const override;
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value do_eval(Interpreter& in) const override;
};

struct GetAttrExpr : Expr {
  ExprPtr object;
  std::string attr;
  Value do_eval(Interpreter& in) const override;
};

struct SliceExpr : Expr {
  ExprPtr start, stop, step;  // each may be null
  Value do_eval(Interpreter&) const override;
};

struct GetItemExpr : Expr {
  ExprPtr object;
  ExprPtr key;  // a SliceExpr for x[a:b:c]
  Value do_eval(Interpreter& in) const override;
};

struct CallExpr : Expr {
  ExprPtr callee;
  CallArgExprs args;
  Value do_eval(Interpreter& in) const override;
};

// A filter or test Jinja2 does not know, or one not implemented here: an error
// when evaluated (Jinja2 itself defers unknown names inside if-blocks to run time).
struct MissingBuiltin {
  TemplateError::Kind kind = TemplateError::Kind::Render;
  std::string message;
};

struct FilterExpr : Expr {
  ExprPtr input;  // null in {% filter %} and {% set x | f %}: the input is the rendered body
  std::string name;
  FilterFn fn = nullptr;
  MissingBuiltin missing;  // when fn is null
  CallArgExprs args;
  Value do_eval(Interpreter& in) const override;
  // Applies the filter (and any chained filters below it) to a given input.
  Value apply(Interpreter& in, const Value& body) const;
};

struct TestExpr : Expr {
  ExprPtr input;
  std::string name;
  TestFn fn = nullptr;
  MissingBuiltin missing;  // when fn is null
  CallArgExprs args;
  Value do_eval(Interpreter& in) const override;
};

struct UnaryExpr : Expr {
  enum class Op { Neg, Pos, Not } op;
  ExprPtr operand;
  Value do_eval(Interpreter& in) const override;
};

struct BinaryExpr : Expr {
  BinaryOp op;
  ExprPtr left, right;
  Value do_eval(Interpreter& in) const override;
};

struct ConcatExpr : Expr {
  std::vector<ExprPtr> parts;
  Value do_eval(Interpreter& in) const override;
};

struct CompareExpr : Expr {
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
  Value do_eval(Interpreter& in) const override;
};

struct AndExpr : Expr {
  ExprPtr left, right;
  Value do_eval(Interpreter& in) const override;
};

struct OrExpr : Expr {
  ExprPtr left, right;
  Value do_eval(Interpreter& in) const override;
};

struct CondExpr : Expr {
  ExprPtr test, if_true, if_false;  // if_false may be null: then undefined
  Value do_eval(Interpreter& in) const override;
};

// ---- statements -------------------------------------------------------------

struct Stmt : Node {
  // Renders, turning a position-less EvalError from below into a TemplateError at this node.
  void render(Interpreter& in, std::string& out) const;

 protected:
  virtual void do_render(Interpreter& in, std::string& out) const = 0;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Renders statements in order, stopping at a pending break/continue.
void render_body(const Body& body, Interpreter& in, std::string& out);

// An assignment target: a name, a namespace attribute (ns.x) or a tuple of targets.
struct Target {
  enum class Kind { Name, NamespaceAttr, Tuple } kind = Kind::Name;
  std::string name;
  std::string attr;
  std::vector<Target> items;
  SourcePos pos;
  void assign(Interpreter& in, const Value& v) const;
};

struct TextStmt : Stmt {
  std::string text;
  void do_render(Interpreter&, std::string& out) const override { out += text; }
};

struct OutputStmt : Stmt {
  ExprPtr expr;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body else_body;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct ForStmt : Stmt {
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // for x in xs if cond
  bool recursive = false;
  Body body;
  Body else_body;
  void do_render(Interpreter& in, std::string& out) const override;
  // One (possibly recursive) run of the loop over `iterable` at `depth0`.
  void run(Interpreter& in, const Value& iterable, int depth0, std::string& out) const;
};

struct SetStmt : Stmt {
  Target target;
  ExprPtr value;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct SetBlockStmt : Stmt {
  Target target;
  std::unique_ptr<FilterExpr> filter;  // optional: {% set x | upper %}
  Body body;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct MacroStmt : Stmt {
  std::string name;
  std::vector<MacroParam> params;
  Body body;
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct CallBlockStmt : Stmt {
  std::unique_ptr<MacroStmt> caller;  // the body as a macro named 'caller'
  std::unique_ptr<CallExpr> call;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct FilterBlockStmt : Stmt {
  std::unique_ptr<FilterExpr> filter;
  Body body;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct WithStmt : Stmt {
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct LoopControlStmt : Stmt {
  bool is_break = false;
  void do_render(Interpreter& in, std::string& out) const override;
};

// {% generation %} (transformers' assistant-mask extension) and {% block %} render their body in place.
struct ScopeStmt : Stmt {
  bool new_scope = false;
  Body body;
  void do_render(Interpreter& in, std::string& out) const override;
};

struct TemplateAst {
  Body body;
};

}  // namespace fathom::jinja
