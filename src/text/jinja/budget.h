#pragma once
// The bounds of one rendering (RenderOptions' limits), so that a hostile template or
// hostile variables can hold neither a core nor gigabytes: a step budget that also
// polls a deadline and a cancellation flag, a cap on the size of any one string or
// list a template builds, and a cap on nested evaluation.
//
// Template::render makes its budget the active one of its thread for the rendering;
// value operations that have no Interpreter at hand (operators, formatting, copies
// of big strings) reach it through active_budget().
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace fathom::jinja {

struct RenderLimits {
  // A step is one evaluated expression or statement, one loop iteration, one item of a
  // bulk operation (iteration, building a list) or kBytesPerStep bytes of a string built
  // or copied: the work and the traffic a rendering may do.
  uint64_t max_steps = 10'000'000;
  size_t max_output_bytes = size_t(16) << 20;  // the rendered text
  size_t max_value_bytes = size_t(16) << 20;   // any one string, list or text form built while rendering
  // Expressions, statements and macro calls nested inside each other while rendering;
  // bounds the native stack a rendering uses.
  uint32_t max_depth = 2000;
  std::optional<std::chrono::steady_clock::time_point> deadline;  // none: no deadline
  std::function<bool()> cancelled;  // polled with the deadline; true stops the rendering
};

class RenderBudget {
 public:
  static constexpr uint64_t kBytesPerStep = 64;
  // The deadline and the cancellation flag are polled every this many steps.
  static constexpr uint64_t kPollInterval = 4096;

  explicit RenderBudget(const RenderLimits& limits);

  // Counts one step; throws EvalError (Kind::Limit) past a limit, the deadline or a cancellation.
  void step() {
    if (++steps_ >= next_poll_) poll();
  }
  // Counts work without checking (safe inside copy constructors); the next step() checks.
  void charge(uint64_t steps) { steps_ += steps; }
  void charge_bytes(size_t bytes) { steps_ += bytes / kBytesPerStep; }

  // Throws unless a string or list of `bytes` may be built; call before allocating it.
  void check_value_size(size_t bytes, std::string_view what) const;
  void check_output_size(size_t bytes) const;

  // Nesting of evaluation; enter() throws past max_depth.
  void enter();
  void leave() { --depth_; }

  uint64_t steps() const { return steps_; }
  const RenderLimits& limits() const { return limits_; }

 private:
  void poll();

  const RenderLimits& limits_;
  uint64_t steps_ = 0;
  uint64_t next_poll_;
  uint32_t depth_ = 0;
};

// The budget of the rendering running on this thread, or nullptr outside rendering.
RenderBudget* active_budget();

// Makes `budget` the active one of this thread while it lives.
class ActiveBudgetScope {
 public:
  explicit ActiveBudgetScope(RenderBudget& budget);
  ~ActiveBudgetScope();
  ActiveBudgetScope(const ActiveBudgetScope&) = delete;
  ActiveBudgetScope& operator=(const ActiveBudgetScope&) = delete;

 private:
  RenderBudget* saved_;
};

// The checks of the active budget, for code without an Interpreter; no-ops outside rendering.
void check_value_size(size_t bytes, std::string_view what);
inline void charge_steps(uint64_t steps) {
  if (RenderBudget* b = active_budget()) b->charge(steps);
}
inline void charge_bytes(size_t bytes) {
  if (bytes < RenderBudget::kBytesPerStep) return;
  if (RenderBudget* b = active_budget()) b->charge_bytes(bytes);
}

// Scoped RenderBudget::enter()/leave() on the active budget.
class DepthScope {
 public:
  explicit DepthScope(RenderBudget& budget) : budget_(budget) { budget_.enter(); }
  ~DepthScope() { budget_.leave(); }
  DepthScope(const DepthScope&) = delete;
  DepthScope& operator=(const DepthScope&) = delete;

 private:
  RenderBudget& budget_;
};

}  // namespace fathom::jinja
