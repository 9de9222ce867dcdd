#include "text/jinja/parser.h"

#include <algorithm>
#include <initializer_list>

namespace fathom::jinja {
namespace {

constexpr int kMaxNesting = 400;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : tokens_(tokens), name_(name) {}

  TemplateAst parse() {
    TemplateAst ast;
    ast.body = subparse({});
    check_names(ast.body, false);
    return ast;
  }

 private:
  // ---- token stream ----
  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  static bool is_op(const Token& t, std::string_view op) { return t.type == TokenType::Operator && t.value == op; }
  static bool is_name(const Token& t, std::string_view name) { return t.type == TokenType::Name && t.value == name; }
  bool op(std::string_view o) const { return is_op(current(), o); }
  bool name_is(std::string_view n) const { return is_name(current(), n); }
  bool skip_op(std::string_view o) {
    if (!op(o)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!name_is(n)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(const std::string& msg, SourcePos pos) const {
    throw TemplateError(TemplateError::Kind::Syntax, name_, pos, msg);
  }
  [[noreturn]] void fail(const std::string& msg) const { fail(msg, current().pos); }
  [[noreturn]] void fail_unsupported(const std::string& msg, SourcePos pos) const {
    throw TemplateError(TemplateError::Kind::Unsupported, name_, pos, msg);
  }

  const Token& expect_op(std::string_view o) {
    if (!op(o)) fail("expected token '" + std::string(o) + "', got " + describe_token(current()));
    return next();
  }
  const Token& expect_name() {
    if (current().type != TokenType::Name) fail("expected token 'name', got " + describe_token(current()));
    return next();
  }
  const Token& expect_name(std::string_view n) {
    if (!name_is(n)) fail("expected token '" + std::string(n) + "', got " + describe_token(current()));
    return next();
  }
  void expect_type(TokenType type, const char* what) {
    if (current().type != type) fail(std::string("expected ") + what + ", got " + describe_token(current()));
    next();
  }

  template <typename T>
  std::unique_ptr<T> make(SourcePos pos) {
    auto node = std::make_unique<T>();
    node->pos = pos;
    return node;
  }

  // Bounds the parser's recursion (and so the depth of the tree) whatever the source:
  // expressions, statement blocks and assignment targets nest at most kMaxNesting deep.
  struct DepthGuard {
    explicit DepthGuard(Parser& p, const char* what = "expression") : p_(p) {
      if (++p_.depth_ > kMaxNesting)
        p_.fail(std::string(what) + " nested too deeply (more than " + std::to_string(kMaxNesting) + " levels)");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  // Left-deep chains built by a loop (a + b + c ..., a.b.c ..., x|f|g ...): each link
  // nests the tree one level deeper, so each counts against the same depth bound.
  struct ChainDepth {
    explicit ChainDepth(Parser& p) : p_(p) {}
    void link() {
      if (++p_.depth_ > kMaxNesting) {
        --p_.depth_;
        p_.fail("expression nested too deeply (a chain of more than " + std::to_string(kMaxNesting) + " operations)");
      }
      ++links_;
    }
    ~ChainDepth() { p_.depth_ -= links_; }
    Parser& p_;
    int links_ = 0;
  };

  // ---- statements ----
  Body subparse(std::vector<std::string_view> end_tokens) {
    Body body;
    end_stack_.push_back(end_tokens);
    while (true) {
      const Token& t = current();
      if (t.type == TokenType::Eof) break;
      if (t.type == TokenType::Data) {
        auto text = make<TextStmt>(t.pos);
        text->text = t.value;
        next();
        while (current().type == TokenType::Data) text->text += next().value;
        body.push_back(std::move(text));
      } else if (t.type == TokenType::VariableBegin) {
        next();
        auto out = make<OutputStmt>(current().pos);
        out->expr = parse_tuple(true, {}, false);
        expect_type(TokenType::VariableEnd, "end of print statement ('}}')");
        body.push_back(std::move(out));
      } else if (t.type == TokenType::BlockBegin) {
        next();
        if (current().type == TokenType::Name &&
            std::find(end_tokens.begin(), end_tokens.end(), current().value) != end_tokens.end()) {
          end_stack_.pop_back();
          return body;
        }
        parse_statement(body);
        expect_type(TokenType::BlockEnd, "end of statement block ('%}')");
      } else {
        fail("unexpected " + describe_token(t));
      }
    }
    end_stack_.pop_back();
    if (!end_tokens.empty()) fail_eof(end_tokens);
    return body;
  }

  std::string looking_for(const std::vector<std::string_view>& end_tokens) const {
    std::string s;
    for (size_t i = 0; i < end_tokens.size(); ++i) s += (i ? " or '" : "'") + std::string(end_tokens[i]) + "'";
    return s;
  }

  [[noreturn]] void fail_eof(const std::vector<std::string_view>& end_tokens) {
    std::string msg = "unexpected end of template; Jinja was looking for the following tags: " + looking_for(end_tokens);
    if (!tag_stack_.empty()) msg += "; the innermost block that needs to be closed is '" + tag_stack_.back().first + "'";
    if (!tag_stack_.empty()) fail(msg, tag_stack_.back().second);
    fail(msg);
  }

  Body parse_statements(std::vector<std::string_view> end_tokens, bool drop_needle) {
    skip_op(":");
    expect_type(TokenType::BlockEnd, "end of statement block ('%}')");
    Body body = subparse(end_tokens);
    if (drop_needle) next();
    return body;
  }

  void parse_statement(Body& out) {
    DepthGuard guard(*this, "statement block");
    const Token& t = current();
    if (t.type != TokenType::Name) fail("tag name expected");
    const std::string tag = t.value;
    const SourcePos pos = t.pos;
    tag_stack_.emplace_back(tag, pos);
    struct Pop {
      std::vector<std::pair<std::string, SourcePos>>& s;
      ~Pop() { s.pop_back(); }
    } pop{tag_stack_};
    if (tag == "for") return out.push_back(parse_for());
    if (tag == "if") return out.push_back(parse_if());
    if (tag == "set") return out.push_back(parse_set());
    if (tag == "macro") return out.push_back(parse_macro());
    if (tag == "call") return out.push_back(parse_call_block());
    if (tag == "filter") return out.push_back(parse_filter_block());
    if (tag == "with") return out.push_back(parse_with());
    if (tag == "break" || tag == "continue") {
      next();
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop", pos);
      auto s = make<LoopControlStmt>(pos);
      s->is_break = tag == "break";
      return out.push_back(std::move(s));
    }
    if (tag == "generation") {  // transformers' AssistantTracker extension
      next();
      auto s = make<ScopeStmt>(pos);
      s->new_scope = true;
      s->body = parse_statements({"endgeneration"}, true);
      return out.push_back(std::move(s));
    }
    if (tag == "block") {
      next();
      expect_name();
      skip_name("scoped");
      skip_name("required");
      auto s = make<ScopeStmt>(pos);
      s->new_scope = true;
      s->body = parse_statements({"endblock"}, true);
      if (current().type == TokenType::Name) next();
      return out.push_back(std::move(s));
    }
    if (tag == "print") {
      next();
      bool first = true;
      while (current().type != TokenType::BlockEnd) {
        if (!first) expect_op(",");
        first = false;
        auto o = make<OutputStmt>(current().pos);
        o->expr = parse_expression(true);
        out.push_back(std::move(o));
      }
      return;
    }
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from")
      fail_unsupported("the '" + tag + "' tag (a chat template has no other templates to load)", pos);
    if (tag == "autoescape") fail_unsupported("the 'autoescape' tag", pos);
    std::string msg = "encountered unknown tag '" + tag + "'";
    if (tag == "do") msg += " (the 'do' extension is not enabled in transformers' environment)";
    if (!end_stack_.empty() && !end_stack_.back().empty()) {
      msg += "; Jinja was looking for the following tags: " + looking_for(end_stack_.back());
      if (tag_stack_.size() > 1) msg += "; the innermost block that needs to be closed is '" + tag_stack_[tag_stack_.size() - 2].first + "'";
    }
    fail(msg, pos);
  }

  StmtPtr parse_for() {
    auto s = make<ForStmt>(next().pos);
    s->target = parse_assign_target(true, false, {"in"}, false);
    expect_name("in");
    s->iter = parse_tuple(false, {"recursive"}, false);
    if (skip_name("if")) s->filter = parse_expression(true);
    s->recursive = skip_name("recursive");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().value != "endfor") s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_if() {
    auto s = make<IfStmt>(next().pos);
    while (true) {
      ExprPtr test = parse_tuple(false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      s->branches.emplace_back(std::move(test), std::move(body));
      const Token& t = next();
      if (t.value == "elif") continue;
      if (t.value == "else") s->else_body = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  StmtPtr parse_set() {
    const SourcePos pos = next().pos;
    Target target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      auto s = make<SetStmt>(pos);
      s->target = std::move(target);
      s->value = parse_tuple(true, {}, false);
      return s;
    }
    auto s = make<SetBlockStmt>(pos);
    s->target = std::move(target);
    if (op("|")) s->filter = parse_filter_chain(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  void parse_signature(MacroStmt& m) {
    expect_op("(");
    bool seen_default = false;
    while (!op(")")) {
      if (!m.params.empty()) expect_op(",");
      MacroParam p;
      p.name = expect_name().value;
      if (skip_op("=")) {
        p.default_value = parse_expression(true);
        seen_default = true;
      } else if (seen_default) {
        fail("non-default argument follows default argument");
      }
      m.params.push_back(std::move(p));
    }
    expect_op(")");
  }

  StmtPtr parse_macro() {
    auto s = make<MacroStmt>(next().pos);
    s->name = expect_name().value;
    parse_signature(*s);
    macro_stack_.push_back(s.get());
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved_loops;
    macro_stack_.pop_back();
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = make<CallBlockStmt>(next().pos);
    s->caller = make<MacroStmt>(s->pos);
    s->caller->name = "caller";
    if (op("(")) parse_signature(*s->caller);
    ExprPtr call = parse_expression(true);
    auto* as_call = dynamic_cast<CallExpr*>(call.get());
    if (!as_call) fail("expected call", s->pos);
    call.release();
    s->call.reset(as_call);
    macro_stack_.push_back(s->caller.get());
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->caller->body = parse_statements({"endcall"}, true);
    loop_depth_ = saved_loops;
    macro_stack_.pop_back();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make<FilterBlockStmt>(next().pos);
    s->filter = parse_filter_chain(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    auto s = make<WithStmt>(next().pos);
    while (current().type != TokenType::BlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      Target t = parse_assign_target(true, false, {}, false);
      expect_op("=");
      s->assignments.emplace_back(std::move(t), parse_expression(true));
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  // ---- assignment targets ----
  Target parse_assign_target(bool with_tuple, bool name_only, std::vector<std::string_view> extra_end,
                             bool with_namespace) {
    Target t;
    t.pos = current().pos;
    if (name_only) {
      t.name = expect_name().value;
      return t;
    }
    auto parse_one = [&]() {
      Target one;
      one.pos = current().pos;
      const Token& tok = current();
      if (tok.type == TokenType::Name) {
        static const char* kConsts[] = {"true", "false", "True", "False", "none", "None"};
        for (const char* c : kConsts)
          if (tok.value == c) fail("can't assign to 'const'", tok.pos);
        next();
        if (with_namespace && op(".")) {
          next();
          one.kind = Target::Kind::NamespaceAttr;
          one.name = tok.value;
          one.attr = expect_name().value;
        } else {
          one.name = tok.value;
        }
        return one;
      }
      if (op("(")) {
        DepthGuard guard(*this, "assignment target");
        next();
        Target inner = parse_assign_target(true, false, extra_end, with_namespace);
        expect_op(")");
        return inner;
      }
      fail("can't assign to " + describe_token(tok), tok.pos);
    };
    if (!with_tuple) return parse_one();
    std::vector<Target> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_one());
      if (op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (items.empty()) fail("expected an assignment target, got " + describe_token(current()));
      return std::move(items[0]);
    }
    t.kind = Target::Kind::Tuple;
    t.items = std::move(items);
    return t;
  }

  bool is_tuple_end(const std::vector<std::string_view>& extra_end) const {
    const Token& t = current();
    if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd || is_op(t, ")")) return true;
    if (t.type == TokenType::Name)
      for (auto e : extra_end)
        if (t.value == e) return true;
    return false;
  }

  // ---- expressions ----
  // Expressions separated by commas form a tuple (Jinja allows one without parentheses).
  ExprPtr parse_tuple(bool with_condexpr, std::vector<std::string_view> extra_end, bool explicit_parentheses) {
    const SourcePos pos = current().pos;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail("expected an expression, got " + describe_token(current()));
    }
    auto t = make<ListExpr>(pos);
    t->items = std::move(items);
    t->tuple = true;
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this);
    ExprPtr expr1 = parse_or();
    while (name_is("if")) {
      const SourcePos pos = next().pos;
      auto c = make<CondExpr>(pos);
      c->test = parse_or();
      if (skip_name("else")) c->if_false = parse_condexpr();
      c->if_true = std::move(expr1);
      expr1 = std::move(c);
    }
    return expr1;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    ChainDepth chain(*this);
    while (name_is("or")) {
      chain.link();
      auto o = make<OrExpr>(next().pos);
      o->left = std::move(left);
      o->right = parse_and();
      left = std::move(o);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    ChainDepth chain(*this);
    while (name_is("and")) {
      chain.link();
      auto a = make<AndExpr>(next().pos);
      a->left = std::move(left);
      a->right = parse_not();
      left = std::move(a);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (name_is("not")) {
      DepthGuard guard(*this);
      auto u = make<UnaryExpr>(next().pos);
      u->op = UnaryExpr::Op::Not;
      u->operand = parse_not();
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const SourcePos pos = current().pos;
    ExprPtr expr = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      CompareOp cop;
      const Token& t = current();
      if (is_op(t, "==")) cop = CompareOp::Eq;
      else if (is_op(t, "!=")) cop = CompareOp::Ne;
      else if (is_op(t, "<")) cop = CompareOp::Lt;
      else if (is_op(t, "<=")) cop = CompareOp::Le;
      else if (is_op(t, ">")) cop = CompareOp::Gt;
      else if (is_op(t, ">=")) cop = CompareOp::Ge;
      else if (is_name(t, "in")) cop = CompareOp::In;
      else if (is_name(t, "not") && is_name(look(), "in")) {
        next();
        cop = CompareOp::NotIn;
      } else {
        break;
      }
      next();
      if (!cmp) {
        cmp = make<CompareExpr>(pos);
        cmp->first = std::move(expr);
      }
      cmp->rest.emplace_back(cop, parse_math1());
    }
    if (cmp) return cmp;
    return expr;
  }

  ExprPtr binary(BinaryOp bop, SourcePos pos, ExprPtr l, ExprPtr r) {
    auto b = make<BinaryExpr>(pos);
    b->op = bop;
    b->left = std::move(l);
    b->right = std::move(r);
    return b;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    ChainDepth chain(*this);
    while (op("+") || op("-")) {
      chain.link();
      const Token& t = next();
      left = binary(t.value == "+" ? BinaryOp::Add : BinaryOp::Sub, t.pos, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    const SourcePos pos = current().pos;
    ExprPtr first = parse_math2();
    if (!op("~")) return first;
    auto c = make<ConcatExpr>(pos);
    c->parts.push_back(std::move(first));
    while (skip_op("~")) c->parts.push_back(parse_math2());
    return c;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    ChainDepth chain(*this);
    while (op("*") || op("/") || op("//") || op("%")) {
      chain.link();
      const Token& t = next();
      const BinaryOp b = t.value == "*"   ? BinaryOp::Mul
                         : t.value == "/" ? BinaryOp::Div
                         : t.value == "//" ? BinaryOp::FloorDiv
                                           : BinaryOp::Mod;
      left = binary(b, t.pos, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    ChainDepth chain(*this);
    while (op("**")) {
      chain.link();
      const Token& t = next();
      left = binary(BinaryOp::Pow, t.pos, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (op("-") || op("+")) {
      const Token& t = next();
      auto u = make<UnaryExpr>(t.pos);
      u->op = t.value == "-" ? UnaryExpr::Op::Neg : UnaryExpr::Op::Pos;
      u->operand = parse_unary(false);
      node = std::move(u);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& t = current();
    if (t.type == TokenType::Name) {
      next();
      if (t.value == "true" || t.value == "True" || t.value == "false" || t.value == "False") {
        auto c = make<ConstExpr>(t.pos);
        c->value = Value(t.value == "true" || t.value == "True");
        return c;
      }
      if (t.value == "none" || t.value == "None") {
        auto c = make<ConstExpr>(t.pos);
        c->value = Value::none();
        return c;
      }
      if (t.value == "caller" || t.value == "varargs" || t.value == "kwargs") {
        for (MacroStmt* m : macro_stack_) {
          if (t.value == "caller") m->uses_caller = true;
          else if (t.value == "varargs") m->uses_varargs = true;
          else m->uses_kwargs = true;
        }
      }
      auto n = make<NameExpr>(t.pos);
      n->name = t.value;
      return n;
    }
    if (t.type == TokenType::String) {
      auto c = make<ConstExpr>(t.pos);
      std::string s = next().value;
      while (current().type == TokenType::String) s += next().value;
      c->value = Value(std::move(s));
      return c;
    }
    if (t.type == TokenType::Integer || t.type == TokenType::Float) {
      auto c = make<ConstExpr>(t.pos);
      c->value = t.type == TokenType::Integer ? Value(t.int_value) : Value(t.float_value);
      next();
      return c;
    }
    if (is_op(t, "(")) {
      next();
      ExprPtr e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op(t, "[")) {
      auto l = make<ListExpr>(next().pos);
      while (!op("]")) {
        if (!l->items.empty()) expect_op(",");
        if (op("]")) break;
        l->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return l;
    }
    if (is_op(t, "{")) {
      auto d = make<DictExpr>(next().pos);
      while (!op("}")) {
        if (!d->items.empty()) expect_op(",");
        if (op("}")) break;
        ExprPtr key = parse_expression(true);
        expect_op(":");
        d->items.emplace_back(std::move(key), parse_expression(true));
      }
      expect_op("}");
      return d;
    }
    fail("unexpected " + describe_token(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    ChainDepth chain(*this);
    while (true) {
      chain.link();
      if (op(".") || op("[")) node = parse_subscript(std::move(node));
      else if (op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    ChainDepth chain(*this);
    while (true) {
      chain.link();
      if (op("|")) node = parse_filter_chain(std::move(node), false);
      else if (name_is("is")) node = parse_test(std::move(node));
      else if (op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.value == ".") {
      const Token& attr = current();
      if (attr.type == TokenType::Name) {
        next();
        auto g = make<GetAttrExpr>(t.pos);
        g->object = std::move(node);
        g->attr = attr.value;
        return g;
      }
      if (attr.type != TokenType::Integer) fail("expected name or number", attr.pos);
      next();
      auto g = make<GetItemExpr>(t.pos);
      g->object = std::move(node);
      auto c = make<ConstExpr>(attr.pos);
      c->value = Value(attr.int_value);
      g->key = std::move(c);
      return g;
    }
    std::vector<ExprPtr> args;
    while (!op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto g = make<GetItemExpr>(t.pos);
    g->object = std::move(node);
    if (args.size() == 1) {
      g->key = std::move(args[0]);
    } else {
      auto tup = make<ListExpr>(t.pos);
      tup->tuple = true;
      tup->items = std::move(args);
      g->key = std::move(tup);
    }
    return g;
  }

  ExprPtr parse_subscribed() {
    const SourcePos pos = current().pos;
    ExprPtr first;
    if (op(":")) {
      next();
    } else {
      first = parse_expression(true);
      if (!op(":")) return first;
      next();
    }
    auto s = make<SliceExpr>(pos);
    s->start = std::move(first);
    if (!op(":") && !op("]") && !op(",")) s->stop = parse_expression(true);
    if (op(":")) {
      next();
      if (!op("]") && !op(",")) s->step = parse_expression(true);
    }
    return s;
  }

  CallArgExprs parse_call_args() {
    const SourcePos pos = expect_op("(").pos;
    CallArgExprs a;
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail("invalid syntax for function call expression", pos);
    };
    while (!op(")")) {
      if (require_comma) {
        expect_op(",");
        if (op(")")) break;
      }
      if (op("*")) {
        ensure(!a.star_args && !a.star_kwargs);
        next();
        a.star_args = parse_expression(true);
      } else if (op("**")) {
        ensure(!a.star_kwargs);
        next();
        a.star_kwargs = parse_expression(true);
      } else if (current().type == TokenType::Name && is_op(look(), "=")) {
        ensure(!a.star_kwargs);
        std::string key = next().value;
        next();
        a.keywords.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!a.star_args && !a.star_kwargs && a.keywords.empty());
        a.positional.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
    return a;
  }

  ExprPtr parse_call(ExprPtr node) {
    auto c = make<CallExpr>(node->pos);  // errors point at the called expression
    c->callee = std::move(node);
    c->args = parse_call_args();
    return c;
  }

  std::string dotted_name() {
    std::string name = expect_name().value;
    while (op(".")) {
      next();
      name += "." + expect_name().value;
    }
    return name;
  }

  // node | f1(args) | f2 ...; node may be null (filter blocks, set blocks).
  std::unique_ptr<FilterExpr> parse_filter_chain(ExprPtr node, bool start_inline) {
    std::unique_ptr<FilterExpr> result;
    ChainDepth chain(*this);
    while (op("|") || start_inline) {
      chain.link();
      if (!start_inline) next();
      start_inline = false;
      const SourcePos pos = current().pos;
      auto f = make<FilterExpr>(pos);
      f->name = dotted_name();
      BuiltinLookup status;
      f->fn = find_filter(f->name, &status);
      if (status == BuiltinLookup::Unsupported) {
        f->missing = {TemplateError::Kind::Unsupported, "the Jinja2 filter '" + f->name + "'"};
      } else if (status == BuiltinLookup::Unknown) {
        f->missing = {TemplateError::Kind::Render, "no filter named '" + f->name + "'"};
        if (f->name == "from_json")
          f->missing.message += " (transformers does not register it; it adds only tojson to Jinja2's builtins)";
      }
      if (op("(")) f->args = parse_call_args();
      f->input = result ? std::move(result) : std::move(node);
      result = std::move(f);
    }
    return result;
  }

  ExprPtr parse_test(ExprPtr node) {
    const SourcePos is_pos = next().pos;
    const bool negated = skip_name("not");
    const SourcePos pos = current().pos;
    auto t = make<TestExpr>(pos);
    t->name = dotted_name();
    BuiltinLookup status;
    t->fn = find_test(t->name, &status);
    if (status == BuiltinLookup::Unsupported) t->missing = {TemplateError::Kind::Unsupported, "the Jinja2 test '" + t->name + "'"};
    else if (status == BuiltinLookup::Unknown) t->missing = {TemplateError::Kind::Render, "no test named '" + t->name + "'"};
    const Token& c = current();
    if (is_op(c, "(")) {
      t->args = parse_call_args();
    } else if ((c.type == TokenType::Name || c.type == TokenType::String || c.type == TokenType::Integer ||
                c.type == TokenType::Float || is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
      if (is_name(c, "is")) fail("You cannot chain multiple tests with is");
      ExprPtr arg = parse_postfix(parse_primary());
      t->args.positional.push_back(std::move(arg));
    }
    t->input = std::move(node);
    if (!negated) return t;
    auto u = make<UnaryExpr>(is_pos);
    u->op = UnaryExpr::Op::Not;
    u->operand = std::move(t);
    return u;
  }

  // ---- Jinja2's compile-time check of filter and test names ----
  // An unknown filter/test is a compile error, except inside an if-statement or
  // an if-expression (a "soft" frame), where Jinja2 raises only if it runs.
  void check_names(const Body& body, bool soft) const {
    for (const auto& stmt : body) check_stmt(stmt.get(), soft);
  }

  void check_stmt(const Stmt* s, bool soft) const {
    if (auto* o = dynamic_cast<const OutputStmt*>(s)) return check_expr(o->expr.get(), soft);
    if (auto* i = dynamic_cast<const IfStmt*>(s)) {
      for (const auto& [test, body] : i->branches) {
        check_expr(test.get(), true);
        check_names(body, true);
      }
      return check_names(i->else_body, true);
    }
    if (auto* f = dynamic_cast<const ForStmt*>(s)) {
      check_expr(f->iter.get(), soft);
      check_expr(f->filter.get(), false);
      check_names(f->body, false);
      return check_names(f->else_body, false);
    }
    if (auto* a = dynamic_cast<const SetStmt*>(s)) return check_expr(a->value.get(), soft);
    if (auto* b = dynamic_cast<const SetBlockStmt*>(s)) {
      check_expr(b->filter.get(), false);
      return check_names(b->body, false);
    }
    if (auto* m = dynamic_cast<const MacroStmt*>(s)) {
      for (const auto& p : m->params) check_expr(p.default_value.get(), false);
      return check_names(m->body, false);
    }
    if (auto* c = dynamic_cast<const CallBlockStmt*>(s)) {
      check_expr(c->call.get(), soft);
      for (const auto& p : c->caller->params) check_expr(p.default_value.get(), false);
      return check_names(c->caller->body, false);
    }
    if (auto* fb = dynamic_cast<const FilterBlockStmt*>(s)) {
      check_expr(fb->filter.get(), false);
      return check_names(fb->body, false);
    }
    if (auto* w = dynamic_cast<const WithStmt*>(s)) {
      for (const auto& [t, e] : w->assignments) check_expr(e.get(), soft);
      return check_names(w->body, false);
    }
    if (auto* sc = dynamic_cast<const ScopeStmt*>(s)) return check_names(sc->body, false);
  }

  void check_args(const CallArgExprs& a, bool soft) const {
    for (const auto& e : a.positional) check_expr(e.get(), soft);
    for (const auto& [k, e] : a.keywords) check_expr(e.get(), soft);
    check_expr(a.star_args.get(), soft);
    check_expr(a.star_kwargs.get(), soft);
  }

  void check_expr(const Expr* e, bool soft) const {
    if (!e) return;
    if (auto* f = dynamic_cast<const FilterExpr*>(e)) {
      if (!f->fn && !soft && f->missing.kind == TemplateError::Kind::Render)
        fail("no filter named '" + f->name + "'" +
                 (f->name == "from_json" ? " (transformers does not register it; it adds only tojson to Jinja2's builtins)"
                                         : ""),
             f->pos);
      check_expr(f->input.get(), soft);
      return check_args(f->args, soft);
    }
    if (auto* t = dynamic_cast<const TestExpr*>(e)) {
      if (!t->fn && !soft && t->missing.kind == TemplateError::Kind::Render)
        fail("no test named '" + t->name + "'", t->pos);
      check_expr(t->input.get(), soft);
      return check_args(t->args, soft);
    }
    if (auto* c = dynamic_cast<const CondExpr*>(e)) {
      check_expr(c->test.get(), true);
      check_expr(c->if_true.get(), true);
      return check_expr(c->if_false.get(), true);
    }
    if (auto* l = dynamic_cast<const ListExpr*>(e)) {
      for (const auto& i : l->items) check_expr(i.get(), soft);
      return;
    }
    if (auto* d = dynamic_cast<const DictExpr*>(e)) {
      for (const auto& [k, v] : d->items) check_expr(k.get(), soft), check_expr(v.get(), soft);
      return;
    }
    if (auto* g = dynamic_cast<const GetAttrExpr*>(e)) return check_expr(g->object.get(), soft);
    if (auto* g = dynamic_cast<const GetItemExpr*>(e)) {
      check_expr(g->object.get(), soft);
      return check_expr(g->key.get(), soft);
    }
    if (auto* sl = dynamic_cast<const SliceExpr*>(e)) {
      check_expr(sl->start.get(), soft);
      check_expr(sl->stop.get(), soft);
      return check_expr(sl->step.get(), soft);
    }
    if (auto* c = dynamic_cast<const CallExpr*>(e)) {
      check_expr(c->callee.get(), soft);
      return check_args(c->args, soft);
    }
    if (auto* u = dynamic_cast<const UnaryExpr*>(e)) return check_expr(u->operand.get(), soft);
    if (auto* b = dynamic_cast<const BinaryExpr*>(e)) {
      check_expr(b->left.get(), soft);
      return check_expr(b->right.get(), soft);
    }
    if (auto* c = dynamic_cast<const ConcatExpr*>(e)) {
      for (const auto& p : c->parts) check_expr(p.get(), soft);
      return;
    }
    if (auto* c = dynamic_cast<const CompareExpr*>(e)) {
      check_expr(c->first.get(), soft);
      for (const auto& [op, x] : c->rest) check_expr(x.get(), soft);
      return;
    }
    if (auto* a = dynamic_cast<const AndExpr*>(e)) {
      check_expr(a->left.get(), soft);
      return check_expr(a->right.get(), soft);
    }
    if (auto* o = dynamic_cast<const OrExpr*>(e)) {
      check_expr(o->left.get(), soft);
      return check_expr(o->right.get(), soft);
    }
  }

  const std::vector<Token>& tokens_;
  const std::string& name_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::pair<std::string, SourcePos>> tag_stack_;
  std::vector<std::vector<std::string_view>> end_stack_;
  std::vector<MacroStmt*> macro_stack_;
};

}  // namespace

TemplateAst parse_template(const std::vector<Token>& tokens, const std::string& template_name) {
  return Parser(tokens, template_name).parse();
}

}  // namespace fathom::jinja
