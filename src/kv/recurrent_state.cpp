#include "kv/recurrent_state.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

RecurrentState::RecurrentState(int64_t conv_dim, int64_t conv_kernel, int64_t value_heads, int64_t key_head_dim,
                               int64_t value_head_dim)
    : conv(Tensor::empty({conv_dim, conv_kernel - 1}, DType::f32)),
      matrix(Tensor::empty({value_heads, key_head_dim, value_head_dim}, DType::f32)) {
  reset();
}

std::unique_ptr<RecurrentState> RecurrentState::clone() const {
  check(!in_step(), "recurrent state: cannot copy during a speculative step");
  auto copy = std::make_unique<RecurrentState>(conv.dim(0), conv.dim(1) + 1, matrix.dim(0), matrix.dim(1), matrix.dim(2));
  std::copy_n(conv.data<float>(), conv.numel(), copy->conv.data<float>());
  std::copy_n(matrix.data<float>(), matrix.numel(), copy->matrix.data<float>());
  copy->length = length;
  return copy;
}

int64_t RecurrentState::bytes() const {
  int64_t total = int64_t(conv.nbytes() + matrix.nbytes());
  if (in_step())
    total += int64_t(step_matrices_.nbytes() + step_conv_start_.nbytes() + step_conv_inputs_.nbytes());
  return total;
}

void RecurrentState::begin_step(int64_t rows) {
  check(!in_step(), "recurrent state: a speculative step is already open");
  check(rows >= 1, "recurrent state: a speculative step of ", rows, " positions");
  const int64_t conv_dim = conv.dim(0);
  step_matrices_ = Tensor::empty({rows - 1, matrix.dim(0), matrix.dim(1), matrix.dim(2)}, DType::f32);
  step_conv_start_ = Tensor::empty(conv.shape(), DType::f32);
  step_conv_inputs_ = Tensor::empty({rows, conv_dim}, DType::f32);
  std::copy_n(conv.data<float>(), conv.numel(), step_conv_start_.data<float>());
  step_rows_ = rows;
  step_start_ = length;
}

float* RecurrentState::copy_after(int64_t p) {
  check(in_step(), "recurrent state: no speculative step is open");
  check(p >= 1 && p <= step_rows_, "recurrent state: position ", p, " of a ", step_rows_, "-position step");
  return p == step_rows_ ? nullptr : step_matrices_.data<float>() + (p - 1) * matrix.numel();
}

Tensor& RecurrentState::step_history() {
  check(in_step(), "recurrent state: no speculative step is open");
  return step_matrices_;
}

void RecurrentState::record_conv_inputs(Backend& backend, const Tensor& x) {
  check(in_step(), "recurrent state: no speculative step is open");
  const int64_t at = step_written(), t = x.dim(0);
  check(x.rank() == 2 && x.dim(1) == conv.dim(0), "recurrent state: conv inputs ", x.shape_string(), " for ",
        conv.dim(0), " channels");
  check(at + t <= step_rows_, "recurrent state: ", at, " + ", t, " positions in a ", step_rows_, "-position step");
  Tensor rows = step_conv_inputs_.slice_rows(at, at + t);
  backend.copy(x, rows);
}

void RecurrentState::resolve_step(int64_t kept) {
  check(in_step(), "recurrent state: no speculative step to resolve");
  check(kept >= 1 && kept <= step_rows_, "recurrent state: keeping ", kept, " of ", step_rows_, " positions");
  check(step_written() == step_rows_, "recurrent state: the step wrote ", step_written(), " of ", step_rows_,
        " positions");
  if (kept < step_rows_) {
    std::copy_n(copy_after(kept), matrix.numel(), matrix.data<float>());
    // The window after `kept` positions: the last `past` inputs of start ++ inputs[0, kept).
    const int64_t conv_dim = conv.dim(0), past = conv.dim(1);
    const float* start = step_conv_start_.data<float>();
    const float* inputs = step_conv_inputs_.data<float>();
    float* window = conv.data<float>();
    for (int64_t c = 0; c < conv_dim; ++c)
      for (int64_t j = 0; j < past; ++j) {
        const int64_t idx = kept + j;
        window[c * past + j] = idx < past ? start[c * past + idx] : inputs[(idx - past) * conv_dim + c];
      }
    length = step_start_ + kept;
  }
  drop_step();
}

void RecurrentState::drop_step() {
  step_matrices_ = Tensor();
  step_conv_start_ = Tensor();
  step_conv_inputs_ = Tensor();
  step_rows_ = 0;
}

void RecurrentState::reset() {
  drop_step();
  std::fill(conv.data<float>(), conv.data<float>() + conv.numel(), 0.0f);
  std::fill(matrix.data<float>(), matrix.data<float>() + matrix.numel(), 0.0f);
  length = 0;
}

}  // namespace fathom
