#pragma once
// The state of one linear-attention (Gated DeltaNet) layer for one sequence:
// the causal conv1d's window over its last inputs and the recurrent matrix,
// both f32 so the recurrence never rounds. Unlike a KV cache it does not grow
// with the sequence, and it cannot be trimmed back to an earlier position.
#include <cstdint>

#include "core/tensor.h"

namespace fathom {

struct RecurrentState {
  Tensor conv;    // [conv_dim, conv_kernel - 1]: the last conv_kernel - 1 inputs, oldest first
  Tensor matrix;  // [value_heads, key_head_dim, value_head_dim]
  int64_t length = 0;  // tokens folded in

  RecurrentState(int64_t conv_dim, int64_t conv_kernel, int64_t value_heads, int64_t key_head_dim,
                 int64_t value_head_dim);
  // The state, and a checkpoint while one is held.
  int64_t bytes() const {
    return int64_t(conv.nbytes() + matrix.nbytes()) +
           (saved_conv.defined() ? int64_t(saved_conv.nbytes() + saved_matrix.nbytes()) : 0);
  }
  // Back to the empty sequence (zeros).
  void reset();
  // A copy of the state to go back to if a speculative step is rejected (the
  // recurrence cannot be run backwards), kept until dropped or restored.
  void checkpoint();
  void restore_checkpoint();
  void drop_checkpoint();

 private:
  Tensor saved_conv, saved_matrix;
  int64_t saved_length = 0;
};

}  // namespace fathom
