#include "model/gemma4_moe.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/moe.h"  // route_top_k, load_experts, run_experts

namespace fathom {

Gemma4Router Gemma4Router::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  Gemma4Router r;
  r.unit = ones(c.hidden_size);
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
  return {load_experts(w, prefix, c.num_experts, c.hidden_size, c.moe_intermediate_size)};
}

void Gemma4Experts::operator()(Backend& b, const Tensor& x, const Gemma4Routing& routing, Tensor& y,
                               bool bf16) const {
  run_experts(b, experts, GateActivation::gelu_tanh, x, routing.experts, routing.weights, routing.top_k, y, bf16);
}

}  // namespace fathom
