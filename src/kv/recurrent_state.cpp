#include "kv/recurrent_state.h"

#include <algorithm>

namespace fathom {

RecurrentState::RecurrentState(int64_t conv_dim, int64_t conv_kernel, int64_t value_heads, int64_t key_head_dim,
                               int64_t value_head_dim)
    : conv(Tensor::empty({conv_dim, conv_kernel - 1}, DType::f32)),
      matrix(Tensor::empty({value_heads, key_head_dim, value_head_dim}, DType::f32)) {
  reset();
}

void RecurrentState::reset() {
  std::fill(conv.data<float>(), conv.data<float>() + conv.numel(), 0.0f);
  std::fill(matrix.data<float>(), matrix.data<float>() + matrix.numel(), 0.0f);
  length = 0;
}

}  // namespace fathom
