#pragma once
// The state of one linear-attention (Gated DeltaNet) layer for one sequence:
// the causal conv1d's window over its last inputs and the recurrent matrix,
// both f32 so the recurrence never rounds. Unlike a KV cache it does not grow
// with the sequence, and it cannot be trimmed back to an earlier position.
//
// A speculative step therefore keeps what a rollback needs while it is open:
// a copy of the matrix after each of its positions but the last (the layer
// writes them out as the recurrence passes them; the last one is `matrix`),
// and the conv window at its start plus the conv inputs of its positions (the
// window after any prefix is the last conv_kernel − 1 of those, so no window
// is copied per position). resolve then sets the state to the one after the
// accepted prefix with nothing run again.
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "core/tensor.h"

namespace fathom {

struct RecurrentState {
  Tensor conv;    // [conv_dim, conv_kernel - 1]: the last conv_kernel - 1 inputs, oldest first
  Tensor matrix;  // [value_heads, key_head_dim, value_head_dim]
  int64_t length = 0;  // tokens folded in

  // Both live on the backend's device.
  RecurrentState(std::shared_ptr<Backend> backend, int64_t conv_dim, int64_t conv_kernel, int64_t value_heads,
                 int64_t key_head_dim, int64_t value_head_dim);
  // The state, plus while a speculative step is open its per-position
  // matrices (rows − 1 of them: the last position's is `matrix`), the conv
  // window at its start and its conv inputs.
  int64_t bytes() const;
  // Back to the empty sequence (zeros); an open step is dropped.
  void reset();
  // An independent copy (no step may be open).
  std::unique_ptr<RecurrentState> clone() const;

  // --- A speculative step of `rows` positions ---
  // Opens the step at the current length; allocates what a rollback needs.
  void begin_step(int64_t rows);
  bool in_step() const { return step_rows_ > 0; }
  // Positions of the open step folded in so far.
  int64_t step_written() const { return length - step_start_; }
  // Where the layer copies the matrix after the step's first p positions
  // (1 ≤ p ≤ rows) as it folds them into `matrix`; null for p = rows, whose
  // matrix is `matrix` itself.
  float* copy_after(int64_t p);
  // The per-position matrices [rows − 1, value_heads, key_head_dim,
  // value_head_dim]: row p − 1 is the matrix after position p (copy_after).
  Tensor& step_history();
  // Keeps the conv inputs x [t, conv_dim] of the next t positions, called
  // before they are folded in.
  void record_conv_inputs(Backend& backend, const Tensor& x);
  // Sets the state to the one after the step's first `kept` positions
  // (1 ≤ kept ≤ rows, all of them written) and closes the step.
  void resolve_step(int64_t kept);

 private:
  void drop_step();

  std::shared_ptr<Backend> backend_;
  Tensor step_matrices_;  // [rows - 1, value_heads, key_head_dim, value_head_dim]: after positions 1 .. rows - 1
  Tensor step_conv_start_;   // [conv_dim, conv_kernel - 1]: `conv` when the step began
  Tensor step_conv_inputs_;  // [rows, conv_dim]: the conv inputs of the step's positions
  int64_t step_rows_ = 0, step_start_ = 0;
};

}  // namespace fathom
