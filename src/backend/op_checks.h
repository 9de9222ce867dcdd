#pragma once
// Argument checks the Backend's public ops share (backend.cpp, backend_ops.cpp).
#include "core/error.h"
#include "core/tensor.h"

namespace fathom::op_checks {

inline void expect_f32(const Tensor& t, const char* op, const char* what) {
  check(t.dtype() == DType::f32, op, ": ", what, " must be f32, got ", dtype_name(t.dtype()));
}

inline void expect_rank(const Tensor& t, int rank, const char* op, const char* what) {
  check(t.rank() == rank, op, ": ", what, " must be ", rank, "-D, got ", t.shape_string());
}

}  // namespace fathom::op_checks
