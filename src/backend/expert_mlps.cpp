// expert_mlps with the routing on the host: the default of every backend, and
// what a device falls back to for steps its own kernels do not take.
#include <vector>

#include "backend/backend.h"
#include "core/error.h"

namespace fathom {

void Backend::expert_mlps_impl(const ExpertBank& bank, const Tensor& x, const Tensor& ids, const Tensor& weights,
                               Tensor& y, bool bf16_inputs) {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = bank.count(), k = ids.dim(1);
  const Tensor host_ids = download(ids), host_weights = download(weights);
  // Each expert's rows and their routing weights, in row order.
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(e));
  std::vector<std::vector<float>> row_weights(static_cast<size_t>(e));
  for (int64_t i = 0; i < t * k; ++i) {
    const int32_t ex = host_ids.data<int32_t>()[i];
    check(ex >= 0 && ex < e, "expert_mlps: expert ", ex, " outside [0, ", e, ")");
    rows[size_t(ex)].push_back(int32_t(i / k));
    row_weights[size_t(ex)].push_back(host_weights.data<float>()[i]);
  }
  fill(y, 0.0f);
  for (int64_t ex = 0; ex < e; ++ex) {
    const int64_t n = int64_t(rows[size_t(ex)].size());
    if (n == 0) continue;
    const Tensor& down = bank.down[size_t(ex)];
    const int64_t inter = down.dim(1);
    Tensor in = empty({n, hidden}, DType::f32);
    gather_rows(x, rows[size_t(ex)], in);
    Tensor gate = empty({n, inter}, DType::f32), up = empty({n, inter}, DType::f32);
    const MatmulTarget gate_up[] = {{&bank.gate[size_t(ex)], nullptr, &gate}, {&bank.up[size_t(ex)], nullptr, &up}};
    matmul_shared(in, gate_up, bf16_inputs);
    if (bank.act == GateActivation::silu) silu_mul(gate, up, gate);
    else gelu_tanh_mul(gate, up, gate);
    Tensor out = empty({n, hidden}, DType::f32);
    matmul(gate, down, nullptr, out, bf16_inputs);
    scatter_add_rows(out, rows[size_t(ex)], row_weights[size_t(ex)], y);
  }
}

}  // namespace fathom
