#pragma once
// The state of one rendering: the scope chain (Jinja scoping: loops, macros and
// `with` open a scope, `if` does not), the template's variables, pending
// break/continue, and the clock for strftime_now.
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/jinja/budget.h"
#include "text/jinja/value.h"

namespace fathom::jinja {

class NamespaceObject;

class Frame {
 public:
  explicit Frame(std::shared_ptr<Frame> parent) : parent_(std::move(parent)) {}
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  const std::shared_ptr<Frame>& parent() const { return parent_; }
  void clear() {
    vars_.clear();
    parent_.reset();
  }

 private:
  std::shared_ptr<Frame> parent_;
  std::unordered_map<std::string, Value> vars_;
};

class Interpreter {
 public:
  enum class Flow { Normal, Break, Continue };
  static constexpr int kMaxCallDepth = 250;

  Interpreter(const std::string& template_name, const Dict& variables, std::function<std::time_t()> clock,
              RenderBudget& budget);
  // Clears every frame: a macro holds its defining frame, which holds the macro.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Scope chain, then the render variables, then the globals; undefined if none.
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v) { frame_->set(name, std::move(v)); }

  const std::shared_ptr<Frame>& frame() const { return frame_; }
  // Makes `frame` current until the guard ends.
  class ScopeGuard {
   public:
    ScopeGuard(Interpreter& in, std::shared_ptr<Frame> frame) : in_(in), saved_(std::move(in.frame_)) {
      in_.frame_ = std::move(frame);
    }
    ~ScopeGuard() { in_.frame_ = std::move(saved_); }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;

   private:
    Interpreter& in_;
    std::shared_ptr<Frame> saved_;
  };
  // A fresh scope whose parent is `parent` (by default the current scope).
  std::shared_ptr<Frame> new_frame(std::shared_ptr<Frame> parent);
  std::shared_ptr<Frame> child_frame() { return new_frame(frame_); }
  // Namespaces are cleared at the end too: one can hold itself.
  void track_namespace(const std::shared_ptr<NamespaceObject>& ns) { namespaces_.push_back(ns); }

  RenderBudget& budget;
  Flow flow = Flow::Normal;
  int call_depth = 0;
  int loop_depth = 0;

  const std::string& template_name() const { return template_name_; }
  std::time_t now() const { return clock_ ? clock_() : std::time(nullptr); }

 private:
  const std::string& template_name_;
  const Dict& variables_;
  std::function<std::time_t()> clock_;
  std::shared_ptr<Frame> frame_;
  std::vector<std::weak_ptr<Frame>> frames_;
  std::vector<std::weak_ptr<NamespaceObject>> namespaces_;
};

}  // namespace fathom::jinja
