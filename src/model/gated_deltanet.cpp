#include "model/gated_deltanet.h"

#include <cmath>

#include "core/error.h"

namespace fathom {

std::vector<int64_t> fused_qkvz_order(const DeltaNetDims& d) {
  const int64_t dk = d.key_head_dim, kd = d.key_dim(), gv = d.num_value_heads / d.num_key_heads * d.value_head_dim;
  std::vector<int64_t> order(size_t(d.conv_dim() + d.value_dim()));
  for (int64_t g = 0; g < d.num_key_heads; ++g) {
    const int64_t base = g * (2 * dk + 2 * gv);  // this key head's [q | k | v | z]
    for (int64_t j = 0; j < dk; ++j) {
      order[size_t(g * dk + j)] = base + j;
      order[size_t(kd + g * dk + j)] = base + dk + j;
    }
    for (int64_t j = 0; j < gv; ++j) {
      order[size_t(2 * kd + g * gv + j)] = base + 2 * dk + j;
      order[size_t(d.conv_dim() + g * gv + j)] = base + 2 * dk + gv + j;
    }
  }
  return order;
}

std::vector<int64_t> fused_ba_order(const DeltaNetDims& d) {
  const int64_t hv = d.num_value_heads, group = d.num_value_heads / d.num_key_heads;
  std::vector<int64_t> order(size_t(2 * hv));
  for (int64_t g = 0; g < d.num_key_heads; ++g)
    for (int64_t j = 0; j < group; ++j) {
      order[size_t(g * group + j)] = g * 2 * group + j;           // b
      order[size_t(hv + g * group + j)] = g * 2 * group + group + j;  // a
    }
  return order;
}

GatedDeltaNet GatedDeltaNet::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c) {
  check(c.linear_attention.has_value(), "gated deltanet: ", prefix, ": config has no linear attention sizes");
  GatedDeltaNet n;
  n.dims = *c.linear_attention;
  n.eps = float(c.rms_norm_eps);
  const DeltaNetDims& d = n.dims;
  check(d.num_key_heads > 0 && d.num_value_heads % d.num_key_heads == 0, "gated deltanet: ", prefix, ": ",
        d.num_value_heads, " value heads do not group over ", d.num_key_heads, " key heads");
  const int64_t hidden = c.hidden_size, hv = d.num_value_heads;
  if (w.has(prefix + ".in_proj_qkvz.weight")) {
    const Tensor qkvz = w.matmul_weight_rows(prefix + ".in_proj_qkvz.weight", d.conv_dim() + d.value_dim(), hidden,
                                             fused_qkvz_order(d));
    n.in_qkv.weight = qkvz.slice_rows(0, d.conv_dim());
    n.in_z.weight = qkvz.slice_rows(d.conv_dim(), d.conv_dim() + d.value_dim());
    const Tensor ba = w.f32_matrix_rows(prefix + ".in_proj_ba.weight", 2 * hv, hidden, fused_ba_order(d));
    n.in_b.weight = ba.slice_rows(0, hv);
    n.in_a.weight = ba.slice_rows(hv, 2 * hv);
  } else {
    n.in_qkv = Linear::load(w, prefix + ".in_proj_qkv", d.conv_dim(), hidden, false);
    n.in_z = Linear::load(w, prefix + ".in_proj_z", d.value_dim(), hidden, false);
    n.in_b = Linear{w.f32_matrix(prefix + ".in_proj_b.weight", hv, hidden), std::nullopt};
    n.in_a = Linear{w.f32_matrix(prefix + ".in_proj_a.weight", hv, hidden), std::nullopt};
  }
  // Conv1d weights are stored [conv_dim, 1, kernel]; the conv runs in f32.
  n.conv_weight = w.f32_tensor(prefix + ".conv1d.weight", {d.conv_dim(), 1, d.conv_kernel})
                      .reshape({d.conv_dim(), d.conv_kernel});
  n.neg_a = w.mapped_vector(prefix + ".A_log", hv, [](float a_log) { return -std::exp(a_log); });
  n.dt_bias = w.vector(prefix + ".dt_bias", hv);
  n.norm = w.vector(prefix + ".norm.weight", d.value_head_dim);
  n.out = Linear::load(w, prefix + ".out_proj", hidden, d.value_dim(), false);
  return n;
}

GatedDeltaNetScratch::GatedDeltaNetScratch(Backend& backend, int64_t t, const DeltaNetDims& d)
    : qkv(backend.empty({t, d.conv_dim()}, DType::f32)),
      conv(backend.empty({t, d.conv_dim()}, DType::f32)),
      z(backend.empty({t, d.value_dim()}, DType::f32)),
      b(backend.empty({t, d.num_value_heads}, DType::f32)),
      a(backend.empty({t, d.num_value_heads}, DType::f32)),
      core(backend.empty({t, d.value_dim()}, DType::f32)) {}

void run_gated_deltanet(Backend& b, const GatedDeltaNet& net, const Tensor& h, RecurrentState& state,
                        GatedDeltaNetScratch& s, Tensor& out, bool bf16) {
  const DeltaNetDims& d = net.dims;
  const int64_t t = h.dim(0), hv = d.num_value_heads, dk = d.key_head_dim, dv = d.value_head_dim;
  check(s.qkv.dim(0) == t && out.dim(0) == t, "gated deltanet: scratch of ", s.qkv.dim(0), " rows for ", t,
        " tokens");
  check(state.conv.dim(0) == d.conv_dim() && state.matrix.dim(0) == hv, "gated deltanet: state ",
        state.matrix.shape_string(), " does not fit the layer");

  const Backend::MatmulTarget proj[] = {{&net.in_qkv.weight, nullptr, &s.qkv}, {&net.in_z.weight, nullptr, &s.z}};
  b.matmul_shared(h, proj, bf16);
  const Backend::MatmulTarget decay[] = {{&net.in_b.weight, nullptr, &s.b}, {&net.in_a.weight, nullptr, &s.a}};
  b.matmul_shared(h, decay, false);

  if (state.in_step()) state.record_conv_inputs(b, s.qkv);
  b.causal_conv1d_silu(s.qkv, net.conv_weight, state.conv, s.conv);
  // q and k: unit L2 norm per head (FLA's eps); q also carries the key_head_dim^-0.5 scale.
  constexpr float kL2Eps = 1e-6f;
  b.l2_norm_heads(s.conv, 0, d.num_key_heads, dk, 1.0f / std::sqrt(float(dk)), kL2Eps);
  b.l2_norm_heads(s.conv, d.key_dim(), d.num_key_heads, dk, 1.0f, kL2Eps);
  b.delta_rule_gates(s.b, s.a, net.neg_a, net.dt_bias);

  const DeltaRuleShape shape = delta_rule_shape(d);
  if (state.in_step()) {
    // A speculative step keeps the matrix after each position, so it runs token
    // by token: the states (and outputs) are decode's, bit for bit.
    b.gated_delta_rule(shape, s.conv, s.a, s.b, 0, state.matrix, s.core, &state.step_history(),
                       state.step_written());
  } else {
    b.gated_delta_rule(shape, s.conv, s.a, s.b, t == 1 ? 0 : kDeltaRuleChunk, state.matrix, s.core);
  }
  state.length += t;

  // Gated RMSNorm per (token, value head): w · x / rms(x) · silu(z).
  Tensor core_rows = s.core.reshape({t * hv, dv});
  b.gated_rms_norm(core_rows, s.z.reshape({t * hv, dv}), net.norm, net.eps);
  net.out(b, s.core, out, bf16);
}

}  // namespace fathom
