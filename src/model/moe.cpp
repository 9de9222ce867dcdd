#include "model/moe.h"

#include "core/error.h"

namespace fathom {

SparseMoe SparseMoe::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  SparseMoe m;
  m.top_k = c.num_experts_per_tok;
  m.norm_topk_prob = c.norm_topk_prob;
  const int64_t e = c.num_experts, hidden = c.hidden_size, inter = c.moe_intermediate_size;
  m.router = w.f32_matrix(prefix + ".gate.weight", e, hidden);
  m.experts = load_experts(w, prefix + ".experts", e, hidden, inter, GateActivation::silu);
  if (c.shared_expert_intermediate_size > 0) {
    m.shared_expert = GatedMlp::load(w, prefix + ".shared_expert", hidden, c.shared_expert_intermediate_size, false);
    m.shared_expert_gate = w.f32_matrix(prefix + ".shared_expert_gate.weight", 1, hidden);
  }
  return m;
}

ExpertBank load_experts(const WeightLoader& w, const std::string& prefix, int64_t experts, int64_t hidden,
                        int64_t intermediate, GateActivation act) {
  ExpertBank bank;
  bank.act = act;
  auto add = [&](Tensor gate, Tensor up, Tensor down) {
    bank.gate.push_back(std::move(gate));
    bank.up.push_back(std::move(up));
    bank.down.push_back(std::move(down));
  };
  // MLX-format folders stack the experts as a switch layer beside them:
  // <parent>.switch_mlp.{gate,up,down}_proj.weight [E, out, in].
  const std::string switch_mlp = prefix.substr(0, prefix.rfind('.') == std::string::npos ? 0 : prefix.rfind('.')) +
                                 ".switch_mlp";
  if (w.has(switch_mlp + ".gate_proj.weight")) {
    const Tensor gate = w.matmul_weight_stack(switch_mlp + ".gate_proj.weight", experts, intermediate, hidden);
    const Tensor up = w.matmul_weight_stack(switch_mlp + ".up_proj.weight", experts, intermediate, hidden);
    const Tensor down = w.matmul_weight_stack(switch_mlp + ".down_proj.weight", experts, hidden, intermediate);
    for (int64_t e = 0; e < experts; ++e)
      add(gate.slice_rows(e * intermediate, (e + 1) * intermediate),
          up.slice_rows(e * intermediate, (e + 1) * intermediate), down.slice_rows(e * hidden, (e + 1) * hidden));
  } else if (w.has(prefix + ".gate_up_proj")) {
    const int64_t i2 = 2 * intermediate;
    const Tensor gate_up = w.matmul_weight_stack(prefix + ".gate_up_proj", experts, i2, hidden);  // [E·2I, H]
    const Tensor down = w.matmul_weight_stack(prefix + ".down_proj", experts, hidden, intermediate);  // [E·H, I]
    for (int64_t e = 0; e < experts; ++e)
      add(gate_up.slice_rows(e * i2, e * i2 + intermediate), gate_up.slice_rows(e * i2 + intermediate, (e + 1) * i2),
          down.slice_rows(e * hidden, (e + 1) * hidden));
  } else {
    for (int64_t e = 0; e < experts; ++e) {
      const std::string p = prefix + "." + std::to_string(e);
      add(w.matmul_weight(p + ".gate_proj.weight", intermediate, hidden),
          w.matmul_weight(p + ".up_proj.weight", intermediate, hidden),
          w.matmul_weight(p + ".down_proj.weight", hidden, intermediate));
    }
  }
  w.backend().bind_experts(bank);
  return bank;
}

void SparseMoe::operator()(Backend& b, const Tensor& x, Tensor& y, bool bf16) const {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = experts.count();
  check(y.dim(0) == t && y.dim(1) == hidden, "moe: x ", x.shape_string(), " and y ", y.shape_string(), " disagree");
  Tensor logits = b.empty({t, e}, DType::f32);
  b.matmul(x, router, nullptr, logits, false);  // routing in f32 even for bf16 compute: see f32_matrix
  Tensor ids = b.empty({t, top_k}, DType::i32), weights = b.empty({t, top_k}, DType::f32);
  b.route_top_k(logits, top_k, norm_topk_prob, nullptr, ids, weights);
  b.expert_mlps(experts, x, ids, weights, y, bf16);
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
