#include "model/gemma4_moe.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/moe.h"  // route_top_k

namespace fathom {

Gemma4Router Gemma4Router::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  Gemma4Router r;
  r.input_scale = w.vector(prefix + ".scale", c.hidden_size);
  r.proj = w.f32_matrix(prefix + ".proj.weight", c.num_experts, c.hidden_size);
  r.per_expert_scale = w.vector(prefix + ".per_expert_scale", c.num_experts);
  r.top_k = c.num_experts_per_tok;
  r.eps = float(c.rms_norm_eps);
  return r;
}

Gemma4Routing Gemma4Router::route(Backend& b, const Tensor& x) const {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = num_experts();
  check(hidden == input_scale.numel(), "gemma4 router: x ", x.shape_string(), " does not match hidden ",
        input_scale.numel());
  check(top_k >= 1 && top_k <= e, "gemma4 router: top_k ", top_k, " outside [1, ", e, "]");
  Tensor unit = Tensor::empty({hidden}, DType::f32);  // the norm has no weight of its own
  for (int64_t d = 0; d < hidden; ++d) unit.data<float>()[d] = 1.0f;
  Tensor h = Tensor::empty({t, hidden}, DType::f32);
  b.rms_norm(x, unit, eps, h);
  // transformers multiplies by the scale vector, then by hidden^-0.5, in that order.
  const float root = float(std::pow(double(hidden), -0.5));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t d = 0; d < hidden; ++d) {
      float& v = h.data<float>()[i * hidden + d];
      v = v * input_scale.data<float>()[d];
      v = v * root;
    }
  Tensor logits = Tensor::empty({t, e}, DType::f32);
  b.matmul(h, proj, nullptr, logits, false);  // f32 even for bf16 compute: near-ties must not flip

  Gemma4Routing r;
  r.top_k = top_k;
  r.experts.reserve(size_t(t * top_k));
  r.weights.reserve(size_t(t * top_k));
  std::vector<int32_t> chosen;
  std::vector<float> weights;
  for (int64_t i = 0; i < t; ++i) {
    route_top_k(logits.data<float>() + i * e, e, top_k, /*renormalize=*/true, chosen, weights);
    for (int64_t j = 0; j < top_k; ++j) {
      r.experts.push_back(chosen[j]);
      r.weights.push_back(weights[j] * per_expert_scale.data<float>()[chosen[j]]);
    }
  }
  return r;
}

Gemma4Experts Gemma4Experts::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  Gemma4Experts m;
  const int64_t e = c.num_experts, hidden = c.hidden_size, inter = c.moe_intermediate_size;
  if (w.has(prefix + ".gate_up_proj")) {
    const Tensor gate_up = w.matmul_weight_stack(prefix + ".gate_up_proj", e, 2 * inter, hidden);  // [E·2I, H]
    const Tensor down = w.matmul_weight_stack(prefix + ".down_proj", e, hidden, inter);            // [E·H, I]
    for (int64_t i = 0; i < e; ++i) {
      GatedMlp x;
      x.gate.weight = gate_up.slice_rows(i * 2 * inter, i * 2 * inter + inter);
      x.up.weight = gate_up.slice_rows(i * 2 * inter + inter, (i + 1) * 2 * inter);
      x.down.weight = down.slice_rows(i * hidden, (i + 1) * hidden);
      m.experts.push_back(std::move(x));
    }
  } else {
    for (int64_t i = 0; i < e; ++i)
      m.experts.push_back(GatedMlp::load(w, prefix + "." + std::to_string(i), hidden, inter, false));
  }
  return m;
}

void Gemma4Experts::operator()(Backend& b, const Tensor& x, const Gemma4Routing& routing, Tensor& y,
                               bool bf16) const {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = int64_t(experts.size()), k = routing.top_k;
  check(y.dim(0) == t && y.dim(1) == hidden, "gemma4 experts: x ", x.shape_string(), " and y ", y.shape_string(),
        " disagree");
  check(int64_t(routing.experts.size()) == t * k && int64_t(routing.weights.size()) == t * k,
        "gemma4 experts: routing holds ", routing.experts.size(), " choices for ", t, " tokens × top_k ", k);

  // Each expert's tokens and their routing weights, in token order.
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(e));
  std::vector<std::vector<float>> token_weights(static_cast<size_t>(e));
  for (int64_t i = 0; i < t * k; ++i) {
    const int32_t ex = routing.experts[i];
    check(ex >= 0 && ex < e, "gemma4 experts: expert ", ex, " outside [0, ", e, ")");
    tokens[ex].push_back(i / k);
    token_weights[ex].push_back(routing.weights[i]);
  }

  std::memset(y.data<float>(), 0, size_t(y.numel()) * sizeof(float));
  for (int64_t ex = 0; ex < e; ++ex) {
    const int64_t n = int64_t(tokens[ex].size());
    if (n == 0) continue;
    const GatedMlp& mlp = experts[ex];
    Tensor in = Tensor::empty({n, hidden}, DType::f32);  // the expert's tokens, gathered
    for (int64_t r = 0; r < n; ++r)
      std::memcpy(in.data<float>() + r * hidden, x.data<float>() + tokens[ex][r] * hidden,
                  size_t(hidden) * sizeof(float));
    Tensor gate = Tensor::empty({n, mlp.intermediate_size()}, DType::f32);
    Tensor up = Tensor::empty({n, mlp.intermediate_size()}, DType::f32);
    Tensor out = Tensor::empty({n, hidden}, DType::f32);
    mlp(b, in, gate, up, out, GateActivation::gelu_tanh, bf16);
    for (int64_t r = 0; r < n; ++r) {
      const float wgt = token_weights[ex][r];
      const float* src = out.data<float>() + r * hidden;
      float* dst = y.data<float>() + tokens[ex][r] * hidden;
      for (int64_t d = 0; d < hidden; ++d) dst[d] += src[d] * wgt;
    }
  }
}

}  // namespace fathom
