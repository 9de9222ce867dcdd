#include "model/gemma4_moe.h"

#include <cmath>

#include "core/error.h"

namespace fathom {

Gemma4Router Gemma4Router::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  Gemma4Router r;
  r.unit = w.ones(c.hidden_size);
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
  Tensor h = b.empty({t, hidden}, DType::f32);
  b.rms_norm(x, unit, eps, h);
  // transformers multiplies by the scale vector, then by hidden^-0.5, in that order.
  b.mul_columns(h, input_scale);
  b.scale(h, float(std::pow(double(hidden), -0.5)));
  Tensor logits = b.empty({t, e}, DType::f32);
  b.matmul(h, proj, nullptr, logits, false);  // f32 even for bf16 compute: near-ties must not flip
  Gemma4Routing r{b.empty({t, top_k}, DType::i32), b.empty({t, top_k}, DType::f32)};
  b.route_top_k(logits, top_k, /*renormalize=*/true, &per_expert_scale, r.ids, r.weights);
  return r;
}

Gemma4Experts Gemma4Experts::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  return {load_experts(w, prefix, c.num_experts, c.hidden_size, c.moe_intermediate_size, GateActivation::gelu_tanh)};
}

void Gemma4Experts::operator()(Backend& b, const Tensor& x, const Gemma4Routing& routing, Tensor& y,
                               bool bf16) const {
  b.expert_mlps(experts, x, routing.ids, routing.weights, y, bf16);
}

}  // namespace fathom
