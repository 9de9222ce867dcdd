#pragma once
// Building blocks shared by architecture files.
#include <optional>
#include <string>

#include "backend/backend.h"
#include "core/tensor.h"
#include "model/weights.h"

namespace fathom {

// A linear projection y = x·Wᵀ (+ b), HF layout W [out, in].
struct Linear {
  Tensor weight;
  std::optional<Tensor> bias;

  static Linear load(const WeightLoader& w, const std::string& prefix, int64_t out, int64_t in, bool has_bias) {
    Linear l;
    l.weight = w.matmul_weight(prefix + ".weight", out, in);
    if (has_bias) l.bias = w.vector(prefix + ".bias", out);
    return l;
  }
  int64_t out_features() const { return weight.dim(0); }
  void operator()(Backend& b, const Tensor& x, Tensor& y, bool bf16) const {
    b.matmul(x, weight, bias ? &*bias : nullptr, y, bf16);
  }
};

}  // namespace fathom
