#pragma once
// Argument checks the Backend's public ops share (backend.cpp, backend_ops.cpp).
#include <initializer_list>

#include "core/error.h"
#include "core/tensor.h"

namespace fathom::op_checks {

inline void expect_f32(const Tensor& t, const char* op, const char* what) {
  check(t.dtype() == DType::f32, op, ": ", what, " must be f32, got ", dtype_name(t.dtype()));
}

inline void expect_rank(const Tensor& t, int rank, const char* op, const char* what) {
  check(t.rank() == rank, op, ": ", what, " must be ", rank, "-D, got ", t.shape_string());
}

// RoPE's x [T, heads, head_dim] and its tables cos, sin [T, rotary_dim / 2].
inline void check_rope(const char* op, const Tensor& x, const Tensor& cos, const Tensor& sin) {
  expect_f32(x, op, "x");
  expect_f32(cos, op, "cos");
  expect_f32(sin, op, "sin");
  check(x.rank() == 3 && cos.rank() == 2 && cos.shape() == sin.shape() && cos.dim(0) == x.dim(0) &&
            2 * cos.dim(1) <= x.dim(2),
        op, ": x ", x.shape_string(), " and cos ", cos.shape_string(), " disagree");
}
inline void check_norm_rope(const char* op, const Tensor& x, const Tensor& w, const Tensor& cos, const Tensor& sin) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &w, &cos, &sin}) expect_f32(*t, op, "every tensor");
  check(x.rank() == 3 && w.rank() == 1 && w.numel() == x.dim(2), op, ": x ", x.shape_string(), " and weight ",
        w.shape_string(), " disagree");
  check(cos.rank() == 2 && cos.shape() == sin.shape() && cos.dim(0) == x.dim(0) && 2 * cos.dim(1) <= x.dim(2), op,
        ": x ", x.shape_string(), " and cos ", cos.shape_string(), " disagree");
}
// q and k of one step: the same rows and head size.
inline void check_qk(const char* op, const Tensor& q, const Tensor& k) {
  check(q.rank() == 3 && k.rank() == 3 && q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2), op, ": q ", q.shape_string(),
        " and k ", k.shape_string(), " disagree on rows or head size");
  check(q.raw() != k.raw(), op, ": q and k are one tensor");
}

}  // namespace fathom::op_checks
