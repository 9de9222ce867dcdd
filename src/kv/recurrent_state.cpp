#include "kv/recurrent_state.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

RecurrentState::RecurrentState(std::shared_ptr<Backend> backend, int64_t conv_dim, int64_t conv_kernel,
                               int64_t value_heads, int64_t key_head_dim, int64_t value_head_dim)
    : conv(backend->empty({conv_dim, conv_kernel - 1}, DType::f32)),
      matrix(backend->empty({value_heads, key_head_dim, value_head_dim}, DType::f32)),
      backend_(std::move(backend)) {
  reset();
}

std::unique_ptr<RecurrentState> RecurrentState::clone() const {
  check(!in_step(), "recurrent state: cannot copy during a speculative step");
  auto copy = std::make_unique<RecurrentState>(backend_, conv.dim(0), conv.dim(1) + 1, matrix.dim(0), matrix.dim(1),
                                               matrix.dim(2));
  backend_->copy(conv, copy->conv);
  backend_->copy(matrix, copy->matrix);
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
  step_matrices_ = backend_->empty({rows - 1, matrix.dim(0), matrix.dim(1), matrix.dim(2)}, DType::f32);
  step_conv_start_ = backend_->empty(conv.shape(), DType::f32);
  step_conv_inputs_ = backend_->empty({rows, conv_dim}, DType::f32);
  backend_->copy(conv, step_conv_start_);
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
    const Tensor after = step_matrices_.slice_rows(kept - 1, kept).reshape(matrix.shape());
    backend_->copy(after, matrix);
    // The window after `kept` positions: the last `past` inputs of start ++
    // inputs[0, kept), rebuilt on the host (a few rows of conv_dim floats).
    const int64_t conv_dim = conv.dim(0), past = conv.dim(1);
    const Tensor start_host = backend_->download(step_conv_start_);
    const Tensor inputs_host = backend_->download(step_conv_inputs_);
    Tensor window = Tensor::empty(conv.shape(), DType::f32);
    const float* start = start_host.data<float>();
    const float* inputs = inputs_host.data<float>();
    for (int64_t c = 0; c < conv_dim; ++c)
      for (int64_t j = 0; j < past; ++j) {
        const int64_t idx = kept + j;
        window.data<float>()[c * past + j] = idx < past ? start[c * past + idx] : inputs[(idx - past) * conv_dim + c];
      }
    backend_->copy(backend_->upload(window), conv);
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
  backend_->fill(conv, 0.0f);
  backend_->fill(matrix, 0.0f);
  length = 0;
}

}  // namespace fathom
