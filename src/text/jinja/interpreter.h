#pragma once
// The state of one rendering: the scope chain (Jinja scoping: loops, macros and
// `with` open a scope, `if` does not), the template's variables, pending
// break/continue, and the clock for strftime_now.
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "text/jinja/value.h"

namespace fathom::jinja {

class Frame {
 public:
  explicit Frame(std::shared_ptr<Frame> parent) : parent_(std::move(parent)) {}
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  const std::shared_ptr<Frame>& parent() const { return parent_; }

 private:
  std::shared_ptr<Frame> parent_;
  std::unordered_map<std::string, Value> vars_;
};

class Interpreter {
 public:
  enum class Flow { Normal, Break, Continue };
  static constexpr int kMaxCallDepth = 250;

  Interpreter(const std::string& template_name, const Dict& variables, std::function<std::time_t()> clock);

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
  // A fresh scope whose parent is the current one.
  std::shared_ptr<Frame> child_frame() const { return std::make_shared<Frame>(frame_); }

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
};

}  // namespace fathom::jinja
