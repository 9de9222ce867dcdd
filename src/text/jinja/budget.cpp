#include "text/jinja/budget.h"

#include <algorithm>

#include "text/jinja/diagnostics.h"

namespace fathom::jinja {
namespace {

thread_local RenderBudget* t_active = nullptr;

template <typename... Parts>
[[noreturn]] void limit_fail(const Parts&... parts) {
  std::string msg;
  ((msg += to_message_part(parts)), ...);
  throw EvalError(msg, TemplateError::Kind::Limit);
}

}  // namespace

RenderBudget::RenderBudget(const RenderLimits& limits)
    : limits_(limits), next_poll_(std::min(kPollInterval, limits.max_steps)) {}

void RenderBudget::poll() {
  if (steps_ > limits_.max_steps) limit_fail("template rendering exceeded ", limits_.max_steps, " steps");
  if (limits_.deadline && std::chrono::steady_clock::now() >= *limits_.deadline)
    limit_fail("template rendering ran past its deadline (after ", steps_, " steps)");
  if (limits_.cancelled && limits_.cancelled()) limit_fail("template rendering was cancelled");
  next_poll_ = std::min(steps_ + kPollInterval, limits_.max_steps + 1);
}

void RenderBudget::check_value_size(size_t bytes, std::string_view what) const {
  if (bytes > limits_.max_value_bytes)
    limit_fail(what, " of ", bytes, " bytes exceeds the template limit of ", limits_.max_value_bytes,
               " bytes per value");
}

void RenderBudget::check_output_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    limit_fail("template output exceeded ", limits_.max_output_bytes, " bytes");
}

void RenderBudget::enter() {
  if (++depth_ > limits_.max_depth) {
    --depth_;
    limit_fail("template rendering nested deeper than ", limits_.max_depth, " levels");
  }
}

RenderBudget* active_budget() { return t_active; }

ActiveBudgetScope::ActiveBudgetScope(RenderBudget& budget) : saved_(t_active) { t_active = &budget; }
ActiveBudgetScope::~ActiveBudgetScope() { t_active = saved_; }

void check_value_size(size_t bytes, std::string_view what) {
  if (RenderBudget* b = active_budget()) b->check_value_size(bytes, what);
}

}  // namespace fathom::jinja
