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

void RecurrentState::checkpoint() {
  saved_conv = Tensor::empty(conv.shape(), DType::f32);
  saved_matrix = Tensor::empty(matrix.shape(), DType::f32);
  std::copy_n(conv.data<float>(), conv.numel(), saved_conv.data<float>());
  std::copy_n(matrix.data<float>(), matrix.numel(), saved_matrix.data<float>());
  saved_length = length;
}

void RecurrentState::restore_checkpoint() {
  check(saved_conv.defined() && saved_conv.numel() == conv.numel(), "recurrent state: no checkpoint to restore");
  std::copy_n(saved_conv.data<float>(), conv.numel(), conv.data<float>());
  std::copy_n(saved_matrix.data<float>(), matrix.numel(), matrix.data<float>());
  length = saved_length;
  drop_checkpoint();
}

void RecurrentState::drop_checkpoint() {
  saved_conv = Tensor();
  saved_matrix = Tensor();
}

void RecurrentState::reset() {
  std::fill(conv.data<float>(), conv.data<float>() + conv.numel(), 0.0f);
  std::fill(matrix.data<float>(), matrix.data<float>() + matrix.numel(), 0.0f);
  length = 0;
}

}  // namespace fathom
