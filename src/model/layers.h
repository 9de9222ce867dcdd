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

// A gated MLP: y = down(act(gate(x)) * up(x)) (SwiGLU, or GeGLU with tanh GELU).
struct GatedMlp {
  Linear gate, up, down;

  static GatedMlp load(const WeightLoader& w, const std::string& prefix, int64_t hidden, int64_t intermediate,
                       bool has_bias) {
    GatedMlp m;
    m.gate = Linear::load(w, prefix + ".gate_proj", intermediate, hidden, has_bias);
    m.up = Linear::load(w, prefix + ".up_proj", intermediate, hidden, has_bias);
    m.down = Linear::load(w, prefix + ".down_proj", hidden, intermediate, has_bias);
    return m;
  }
  int64_t intermediate_size() const { return gate.out_features(); }
  // x [rows, hidden] → y [rows, hidden]; gate_buf, up_buf [rows, intermediate] scratch.
  void operator()(Backend& b, const Tensor& x, Tensor& gate_buf, Tensor& up_buf, Tensor& y, GateActivation act,
                  bool bf16) const {
    const Backend::MatmulTarget gate_up[] = {{&gate.weight, gate.bias ? &*gate.bias : nullptr, &gate_buf},
                                             {&up.weight, up.bias ? &*up.bias : nullptr, &up_buf}};
    b.matmul_shared(x, gate_up, bf16);
    if (act == GateActivation::silu) b.silu_mul(gate_buf, up_buf, gate_buf);
    else b.gelu_tanh_mul(gate_buf, up_buf, gate_buf);
    down(b, gate_buf, y, bf16);
  }
};

}  // namespace fathom
