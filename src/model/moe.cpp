#include "model/moe.h"

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
  // MLX-format folders stack the experts as a switch layer beside them:
  // <parent>.switch_mlp.{gate,up,down}_proj.weight [E, out, in].
  const std::string switch_mlp = prefix.substr(0, prefix.rfind('.') == std::string::npos ? 0 : prefix.rfind('.')) +
                                 ".switch_mlp";
  if (w.has(switch_mlp + ".gate_proj.weight")) {
    const Tensor gate = w.matmul_weight_stack(switch_mlp + ".gate_proj.weight", experts, intermediate, hidden);
    const Tensor up = w.matmul_weight_stack(switch_mlp + ".up_proj.weight", experts, intermediate, hidden);
    const Tensor down = w.matmul_weight_stack(switch_mlp + ".down_proj.weight", experts, hidden, intermediate);
    for (int64_t e = 0; e < experts; ++e) {
      GatedMlp m;
      m.gate.weight = gate.slice_rows(e * intermediate, (e + 1) * intermediate);
      m.up.weight = up.slice_rows(e * intermediate, (e + 1) * intermediate);
      m.down.weight = down.slice_rows(e * hidden, (e + 1) * hidden);
      out.push_back(std::move(m));
    }
  } else if (w.has(prefix + ".gate_up_proj")) {
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

ExpertRouting route_experts(Backend& b, const Tensor& logits, int64_t top_k, bool renormalize,
                            const Tensor* expert_scale) {
  const int64_t t = logits.dim(0);
  Tensor ids = b.empty({t, top_k}, DType::i32), weights = b.empty({t, top_k}, DType::f32);
  b.route_top_k(logits, top_k, renormalize, expert_scale, ids, weights);
  const Tensor host_ids = b.download(ids), host_weights = b.download(weights);
  ExpertRouting r;
  r.top_k = top_k;
  r.experts.assign(host_ids.data<int32_t>(), host_ids.data<int32_t>() + t * top_k);
  r.weights.assign(host_weights.data<float>(), host_weights.data<float>() + t * top_k);
  return r;
}

void run_experts(Backend& b, std::span<const GatedMlp> experts, GateActivation act, const Tensor& x,
                 const ExpertRouting& routing, Tensor& y, bool bf16) {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = int64_t(experts.size()), k = routing.top_k;
  check(y.dim(0) == t && y.dim(1) == hidden, "experts: x ", x.shape_string(), " and y ", y.shape_string(),
        " disagree");
  check(int64_t(routing.experts.size()) == t * k && int64_t(routing.weights.size()) == t * k, "experts: ",
        routing.experts.size(), " choices for ", t, " tokens × top_k ", k);
  // Each expert's tokens and their routing weights, in token order.
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(e));
  std::vector<std::vector<float>> token_weights(static_cast<size_t>(e));
  for (int64_t i = 0; i < t * k; ++i) {
    const int32_t ex = routing.experts[size_t(i)];
    check(ex >= 0 && ex < e, "experts: expert ", ex, " outside [0, ", e, ")");
    tokens[size_t(ex)].push_back(int32_t(i / k));
    token_weights[size_t(ex)].push_back(routing.weights[size_t(i)]);
  }
  b.fill(y, 0.0f);
  for (int64_t ex = 0; ex < e; ++ex) {
    const int64_t n = int64_t(tokens[size_t(ex)].size());
    if (n == 0) continue;
    const GatedMlp& mlp = experts[size_t(ex)];
    Tensor in = b.empty({n, hidden}, DType::f32);  // the expert's tokens, gathered
    b.gather_rows(x, tokens[size_t(ex)], in);
    Tensor gate = b.empty({n, mlp.intermediate_size()}, DType::f32);
    Tensor up = b.empty({n, mlp.intermediate_size()}, DType::f32);
    Tensor out = b.empty({n, hidden}, DType::f32);
    mlp(b, in, gate, up, out, act, bf16);
    b.scatter_add_rows(out, tokens[size_t(ex)], token_weights[size_t(ex)], y);
  }
}

void SparseMoe::operator()(Backend& b, const Tensor& x, Tensor& y, bool bf16) const {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = int64_t(experts.size());
  check(y.dim(0) == t && y.dim(1) == hidden, "moe: x ", x.shape_string(), " and y ", y.shape_string(), " disagree");
  Tensor logits = b.empty({t, e}, DType::f32);
  b.matmul(x, router, nullptr, logits, false);  // routing in f32 even for bf16 compute: see f32_matrix
  run_experts(b, experts, GateActivation::silu, x, route_experts(b, logits, top_k, norm_topk_prob), y, bf16);
  if (shared_expert) add_shared_expert(b, x, y, bf16);
}

void SparseMoe::add_shared_expert(Backend& b, const Tensor& x, Tensor& y, bool bf16) const {
  const int64_t t = x.dim(0), hidden = x.dim(1), inter = shared_expert->intermediate_size();
  Tensor gate = b.empty({t, inter}, DType::f32);
  Tensor up = b.empty({t, inter}, DType::f32);
  Tensor out = b.empty({t, hidden}, DType::f32);
  Tensor scale = b.empty({t, 1}, DType::f32);
  (*shared_expert)(b, x, gate, up, out, GateActivation::silu, bf16);
  b.matmul(x, *shared_expert_gate, nullptr, scale, false);  // f32 like the router
  b.sigmoid_mul(out, scale);
  b.add_inplace(y, out);
}

}  // namespace fathom
