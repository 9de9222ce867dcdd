#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace fathom {

SparseMoe SparseMoe::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  SparseMoe m;
  m.top_k = c.num_experts_per_tok;
  m.norm_topk_prob = c.norm_topk_prob;
  const int64_t e = c.num_experts, hidden = c.hidden_size, inter = c.moe_intermediate_size;
  m.router = w.f32_matrix(prefix + ".gate.weight", e, hidden);
  m.experts = load_experts(w, prefix + ".experts", e, hidden, inter);
  if (c.shared_expert_intermediate_size > 0) {
    m.shared_expert = GatedMlp::load(w, prefix + ".shared_expert", hidden, c.shared_expert_intermediate_size, false);
    m.shared_expert_gate = w.f32_matrix(prefix + ".shared_expert_gate.weight", 1, hidden);
  }
  return m;
}

std::vector<GatedMlp> load_experts(const WeightLoader& w, const std::string& prefix, int64_t experts, int64_t hidden,
                                   int64_t intermediate) {
  std::vector<GatedMlp> out;
  if (w.has(prefix + ".gate_up_proj")) {
    const int64_t i2 = 2 * intermediate;
    const Tensor gate_up = w.matmul_weight_stack(prefix + ".gate_up_proj", experts, i2, hidden);  // [E·2I, H]
    const Tensor down = w.matmul_weight_stack(prefix + ".down_proj", experts, hidden, intermediate);  // [E·H, I]
    for (int64_t e = 0; e < experts; ++e) {
      GatedMlp m;
      m.gate.weight = gate_up.slice_rows(e * i2, e * i2 + intermediate);
      m.up.weight = gate_up.slice_rows(e * i2 + intermediate, (e + 1) * i2);
      m.down.weight = down.slice_rows(e * hidden, (e + 1) * hidden);
      out.push_back(std::move(m));
    }
  } else {
    for (int64_t e = 0; e < experts; ++e)
      out.push_back(GatedMlp::load(w, prefix + "." + std::to_string(e), hidden, intermediate, false));
  }
  return out;
}

void run_experts(Backend& b, std::span<const GatedMlp> experts, GateActivation act, const Tensor& x,
                 const std::vector<int32_t>& chosen, const std::vector<float>& weights, int64_t k, Tensor& y,
                 bool bf16) {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = int64_t(experts.size());
  check(y.dim(0) == t && y.dim(1) == hidden, "experts: x ", x.shape_string(), " and y ", y.shape_string(),
        " disagree");
  check(int64_t(chosen.size()) == t * k && int64_t(weights.size()) == t * k, "experts: ", chosen.size(),
        " choices for ", t, " tokens × top_k ", k);
  // Each expert's tokens and their routing weights, in token order.
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(e));
  std::vector<std::vector<float>> token_weights(static_cast<size_t>(e));
  for (int64_t i = 0; i < t * k; ++i) {
    const int32_t ex = chosen[size_t(i)];
    check(ex >= 0 && ex < e, "experts: expert ", ex, " outside [0, ", e, ")");
    tokens[size_t(ex)].push_back(i / k);
    token_weights[size_t(ex)].push_back(weights[size_t(i)]);
  }
  std::memset(y.data<float>(), 0, size_t(y.numel()) * sizeof(float));
  for (int64_t ex = 0; ex < e; ++ex) {
    const int64_t n = int64_t(tokens[size_t(ex)].size());
    if (n == 0) continue;
    const GatedMlp& mlp = experts[size_t(ex)];
    Tensor in = Tensor::empty({n, hidden}, DType::f32);  // the expert's tokens, gathered
    for (int64_t r = 0; r < n; ++r)
      std::memcpy(in.data<float>() + r * hidden, x.data<float>() + tokens[size_t(ex)][size_t(r)] * hidden,
                  size_t(hidden) * sizeof(float));
    Tensor gate = Tensor::empty({n, mlp.intermediate_size()}, DType::f32);
    Tensor up = Tensor::empty({n, mlp.intermediate_size()}, DType::f32);
    Tensor out = Tensor::empty({n, hidden}, DType::f32);
    mlp(b, in, gate, up, out, act, bf16);
    for (int64_t r = 0; r < n; ++r) {
      const float wgt = token_weights[size_t(ex)][size_t(r)];
      const float* src = out.data<float>() + r * hidden;
      float* dst = y.data<float>() + tokens[size_t(ex)][size_t(r)] * hidden;
      for (int64_t d = 0; d < hidden; ++d) dst[d] += src[d] * wgt;
    }
  }
}

void route_top_k(const float* logits, int64_t experts, int64_t k, bool renormalize, std::vector<int32_t>& chosen,
                 std::vector<float>& weights) {
  std::vector<float> p(static_cast<size_t>(experts));
  const float mx = *std::max_element(logits, logits + experts);
  float sum = 0.0f;
  for (int64_t i = 0; i < experts; ++i) sum += p[i] = std::exp(logits[i] - mx);
  for (auto& v : p) v /= sum;
  std::vector<int32_t> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  chosen.assign(order.begin(), order.begin() + k);
  weights.resize(static_cast<size_t>(k));
  float total = 0.0f;
  for (int64_t j = 0; j < k; ++j) total += weights[j] = p[chosen[j]];
  if (renormalize)
    for (auto& v : weights) v /= total;
}

void SparseMoe::operator()(Backend& b, const Tensor& x, Tensor& y, bool bf16) const {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = int64_t(experts.size());
  check(y.dim(0) == t && y.dim(1) == hidden, "moe: x ", x.shape_string(), " and y ", y.shape_string(), " disagree");
  Tensor logits = Tensor::empty({t, e}, DType::f32);
  b.matmul(x, router, nullptr, logits, false);  // routing in f32 even for bf16 compute: see f32_matrix

  std::vector<int32_t> chosen, all_chosen;
  std::vector<float> weights, all_weights;
  for (int64_t i = 0; i < t; ++i) {
    route_top_k(logits.data<float>() + i * e, e, top_k, norm_topk_prob, chosen, weights);
    all_chosen.insert(all_chosen.end(), chosen.begin(), chosen.end());
    all_weights.insert(all_weights.end(), weights.begin(), weights.end());
  }
  run_experts(b, experts, GateActivation::silu, x, all_chosen, all_weights, top_k, y, bf16);
  if (shared_expert) add_shared_expert(b, x, y, bf16);
}

void SparseMoe::add_shared_expert(Backend& b, const Tensor& x, Tensor& y, bool bf16) const {
  const int64_t t = x.dim(0), hidden = x.dim(1), inter = shared_expert->intermediate_size();
  Tensor gate = Tensor::empty({t, inter}, DType::f32);
  Tensor up = Tensor::empty({t, inter}, DType::f32);
  Tensor out = Tensor::empty({t, hidden}, DType::f32);
  Tensor scale = Tensor::empty({t, 1}, DType::f32);
  (*shared_expert)(b, x, gate, up, out, GateActivation::silu, bf16);
  b.matmul(x, *shared_expert_gate, nullptr, scale, false);  // f32 like the router
  for (int64_t i = 0; i < t; ++i) {
    const float s = 1.0f / (1.0f + std::exp(-scale.data<float>()[i]));
    const float* src = out.data<float>() + i * hidden;
    float* dst = y.data<float>() + i * hidden;
    for (int64_t d = 0; d < hidden; ++d) dst[d] += s * src[d];
  }
}

}  // namespace fathom
