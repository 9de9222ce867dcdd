// A mixture of experts with its routing left on the GPU. The host path
// (Backend::expert_mlps_impl) reads each step's choices back to decide which
// experts to run: a wait for the GPU on every MoE layer, and a step that
// cannot be recorded as a graph. Here four kernels take the routing where
// route_top_k left it:
//   plan     — the step's (row, choice) pairs sorted by expert: each picked
//              expert once, with its range of pairs;
//   gate/up  — per picked expert and 8 output columns, act(gate·x)·(up·x) for
//              every pair of that expert: its weights are read once a step,
//              however many rows picked it;
//   down     — the same over the activated rows;
//   combine  — each row's choices added in ascending expert order (as the host
//              path and transformers add them), weighted.
// Grids are sized by what the step could pick (min(experts, rows·k) groups),
// so a recorded step replays whatever the routing turns out to be; groups past
// the step's count return at once.
#include <algorithm>
#include <vector>

#include "backend/cuda/activations.h"
#include "backend/cuda/bf16_vectors.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace fathom::cuda {

// What bind_experts keeps of a bank: a table of every expert's weight
// addresses on the device (gate[E], up[E], down[E]) and their format.
struct DeviceExperts {
  Tensor table;
  DType dtype = DType::f32;
  int64_t count = 0, hidden = 0, inter = 0;
  const void* const* gate() const { return static_cast<const void* const*>(table.raw()); }
  const void* const* up() const { return gate() + count; }
  const void* const* down() const { return gate() + 2 * count; }
};

namespace {

constexpr int kPlanMaxPairs = 1024;  // one block sorts a step's pairs
constexpr int kColumnsPerBlock = 8;  // one warp an output column
constexpr int kPairsAtOnce = 4;      // pairs sharing one pass over a weight row
constexpr int kCombineThreads = 256;

// The plan's layout (i32): [0] the number of picked experts G; [1, 1 + gmax)
// each group's expert, ascending; [1 + gmax, 2 + 2·gmax) each group's first
// pair in `order` (and past the last group, the number of valid pairs); then
// `order` [n]: pair indices (row·k + choice) sorted by (expert, index).
struct PlanView {
  const int32_t* plan;
  int gmax;
  __device__ int groups() const { return plan[0]; }
  __device__ int expert(int g) const { return plan[1 + g]; }
  __device__ int begin(int g) const { return plan[1 + gmax + g]; }
  __device__ int pair(int i) const { return plan[2 + 2 * gmax + i]; }
};

__global__ void expert_plan_kernel(const int32_t* ids, int n, int experts, int gmax, int32_t* plan) {
  __shared__ int key[kPlanMaxPairs];
  await_previous_kernel();
  const int p = threadIdx.x;
  const bool live = p < n;
  // An id outside the bank (no kernel of ours writes one) sorts last and runs nothing.
  int kp = experts;
  if (live) {
    const int id = ids[p];
    kp = id >= 0 && id < experts ? id : experts;
    key[p] = kp;
  }
  __syncthreads();
  int rank = 0, earlier_twins = 0;
  if (live)
    for (int q = 0; q < n; ++q) {
      const int kq = key[q];
      rank += kq < kp || (kq == kp && q < p);
      earlier_twins += kq == kp && q < p;
    }
  const bool leads = live && kp < experts && earlier_twins == 0;  // first pair of its expert
  // Each group's index: the leaders of smaller experts before it.
  __shared__ int leader_key[kPlanMaxPairs];
  leader_key[p] = leads ? kp : experts;
  const int groups = __syncthreads_count(leads), valid = __syncthreads_count(live && kp < experts);
  int32_t* expert_of = plan + 1;
  int32_t* begin = plan + 1 + gmax;
  int32_t* order = plan + 2 + 2 * gmax;
  if (live) order[rank] = p;
  if (leads) {
    int g = 0;
    for (int q = 0; q < n; ++q) g += leader_key[q] < kp;
    expert_of[g] = kp;
    begin[g] = rank;
  }
  if (p == 0) {
    plan[0] = groups;
    begin[groups] = valid;
  }
}

// 8 consecutive weights (16-byte aligned) widened to f32.
__device__ __forceinline__ void load_w8(const __nv_bfloat16* w, float out[8]) {
  widen_bf16x8(__ldg(reinterpret_cast<const uint4*>(w)), out);
}
__device__ __forceinline__ void load_w8(const float* w, float out[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(w)), b = __ldg(reinterpret_cast<const float4*>(w) + 1);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

struct ExpertRowsArgs {
  const void* const* first;   // per expert: gate (gated) or down, [N, K]
  const void* const* second;  // per expert: up [N, K] (gated only)
  PlanView plan;
  const float* in;  // [*, K]: pair p reads row p / in_div
  int in_div;
  float* out;  // [pairs, N]: pair p's row
  int64_t n, k;
  bool round_inputs;  // bf16 compute: the inputs rounded to bf16 as every matmul rounds them
  bool gelu;          // gated: GELU-tanh, else SiLU
};

// One warp an output column f of one picked expert; lane l reads 8
// consecutive weights at 8·l + 256·j, for up to kPairsAtOnce pairs at a time,
// kUnroll chunks' weights loaded before any is used. Decode's few rows an
// expert want 4 loads a lane in flight (a 30B-A3B-shape step: 2.03 → 1.30 ms);
// a wide batch's several pairs an expert keep the GPU busy with 1, and 4
// costs it registers (64 rows: 13.4 → 16.2 ms).
template <typename W, bool kGated, int kUnroll>
__global__ void expert_rows_kernel(ExpertRowsArgs a) {
  await_previous_kernel();
  const int g = blockIdx.x;
  if (g >= a.plan.groups()) return;
  const int64_t f = int64_t(blockIdx.y) * kColumnsPerBlock + threadIdx.x / 32;
  if (f >= a.n) return;
  const int e = a.plan.expert(g), first = a.plan.begin(g), last = a.plan.begin(g + 1);
  const int lane = threadIdx.x % 32;
  const W* w0 = static_cast<const W*>(a.first[e]) + f * a.k;
  const W* w1 = kGated ? static_cast<const W*>(a.second[e]) + f * a.k : nullptr;
  for (int p0 = first; p0 < last; p0 += kPairsAtOnce) {
    const int np = min(kPairsAtOnce, last - p0);
    const float* x[kPairsAtOnce];
#pragma unroll
    for (int i = 0; i < kPairsAtOnce; ++i) x[i] = a.in + int64_t(a.plan.pair(p0 + min(i, np - 1)) / a.in_div) * a.k;
    float acc0[kPairsAtOnce] = {}, acc1[kPairsAtOnce] = {};
    for (int64_t c0 = 8 * lane; c0 < a.k; c0 += 256 * kUnroll) {
      float wa[kUnroll][8], wb[kUnroll][8];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + 256 * u;
        if (c >= a.k) break;
        load_w8(w0 + c, wa[u]);
        if constexpr (kGated) load_w8(w1 + c, wb[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + 256 * u;
        if (c >= a.k) break;
#pragma unroll
        for (int i = 0; i < kPairsAtOnce; ++i) {
          if (i >= np) break;
          const float4 lo = __ldg(reinterpret_cast<const float4*>(x[i] + c));
          const float4 hi = __ldg(reinterpret_cast<const float4*>(x[i] + c) + 1);
          float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
          if (a.round_inputs)
#pragma unroll
            for (int j = 0; j < 8; ++j) xv[j] = round_bf16(xv[j]);
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            acc0[i] = fmaf(wa[u][j], xv[j], acc0[i]);
            if constexpr (kGated) acc1[i] = fmaf(wb[u][j], xv[j], acc1[i]);
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kPairsAtOnce; ++i) {
      if (i >= np) break;
      float s0 = acc0[i], s1 = acc1[i];
      for (int o = 16; o > 0; o >>= 1) {
        s0 += __shfl_xor_sync(0xffffffffu, s0, o);
        if constexpr (kGated) s1 += __shfl_xor_sync(0xffffffffu, s1, o);
      }
      if (lane == 0) {
        float v = s0;
        if constexpr (kGated) v = (a.gelu ? gelu_tanhf(s0) : siluf(s0)) * s1;
        a.out[int64_t(a.plan.pair(p0 + i)) * a.n + f] = v;
      }
    }
  }
}

// y[r, c] = Σ over row r's choices in ascending expert order of weight · out[pair, c].
__global__ void expert_combine_kernel(const float* out, const int32_t* ids, const float* weights, int k, int experts,
                                      int64_t hidden, float* y) {
  __shared__ int slot_at[32];
  await_previous_kernel();
  const int64_t r = blockIdx.x;
  if (threadIdx.x < k) {
    const int s = threadIdx.x, id = ids[r * k + s];
    int rank = 0;
    for (int q = 0; q < k; ++q) {
      const int other = ids[r * k + q];
      rank += other < id || (other == id && q < s);
    }
    slot_at[rank] = s;
  }
  __syncthreads();
  const int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= hidden) return;
  float acc = 0.0f;
  for (int j = 0; j < k; ++j) {
    const int s = slot_at[j], id = ids[r * k + s];
    if (id < 0 || id >= experts) continue;
    acc += weights[r * k + s] * out[(r * k + s) * hidden + c];
  }
  y[r * hidden + c] = acc;
}

}  // namespace

void CudaBackend::bind_experts(ExpertBank& bank) {
  const int64_t count = bank.count();
  const Tensor& g0 = bank.gate[0];
  const int64_t inter = g0.dim(0), hidden = g0.dim(1);
  bool fits = (g0.dtype() == DType::bf16 || g0.dtype() == DType::f32) && hidden % 8 == 0 && inter % 8 == 0;
  std::vector<const void*> table;
  for (const std::vector<Tensor>* list : {&bank.gate, &bank.up, &bank.down})
    for (const Tensor& w : *list) {
      fits = fits && w.dtype() == g0.dtype() && w.rank() == 2 && aligned16(w.raw());
      table.push_back(w.raw());
    }
  if (!fits) {
    ++unbound_expert_banks_;  // quantized experts, or widths the kernels do not take: the host's routing
    return;
  }
  Tensor host = Tensor::empty({int64_t(table.size() * sizeof(void*) / 4)}, DType::u32);
  std::copy(table.begin(), table.end(), static_cast<const void**>(host.raw()));
  auto bound = std::make_shared<DeviceExperts>();
  bound->table = upload_impl(host);
  bound->dtype = g0.dtype();
  bound->count = count, bound->hidden = hidden, bound->inter = inter;
  bank.device = std::move(bound);
}

bool CudaBackend::experts_on_device(int64_t rows) const {
  return unbound_expert_banks_ == 0 && rows <= kExpertRowsOnDevice;
}

void CudaBackend::expert_mlps_impl(const ExpertBank& bank, const Tensor& x, const Tensor& ids, const Tensor& weights,
                                   Tensor& y, bool bf16_inputs) {
  const int64_t t = x.dim(0), k = ids.dim(1), n = t * k;
  const auto* bound = static_cast<const DeviceExperts*>(bank.device.get());
  if (!bound || t > kExpertRowsOnDevice || n > kPlanMaxPairs || k > 32)
    return Backend::expert_mlps_impl(bank, x, ids, weights, y, bf16_inputs);
  const int64_t e = bound->count, hidden = bound->hidden, inter = bound->inter;
  const int gmax = int(std::min(e, n));
  Tensor plan = empty_impl({n + 2 * gmax + 2}, DType::i32);
  Tensor act = empty_impl({n, inter}, DType::f32), out = empty_impl({n, hidden}, DType::f32);
  launch("expert_mlps: plan", expert_plan_kernel, 1, unsigned((n + 31) / 32 * 32), 0, ids.data<int32_t>(), int(n),
         int(e), gmax, plan.data<int32_t>());
  const PlanView view{plan.data<int32_t>(), gmax};
  const ExpertRowsArgs gate_up{bound->gate(), bound->up(), view, x.data<float>(), int(k), act.data<float>(), inter,
                               hidden, bf16_inputs, bank.act == GateActivation::gelu_tanh};
  const ExpertRowsArgs down{bound->down(), nullptr, view, act.data<float>(), 1, out.data<float>(), hidden,
                            inter, bf16_inputs, false};
  const dim3 block(32 * kColumnsPerBlock);
  const dim3 gate_up_grid(unsigned(gmax), unsigned((inter + kColumnsPerBlock - 1) / kColumnsPerBlock));
  const dim3 down_grid(unsigned(gmax), unsigned((hidden + kColumnsPerBlock - 1) / kColumnsPerBlock));
  // Decode-like: about one pair an expert (see expert_rows_kernel).
  const bool few = n <= 2 * gmax;
  auto rows = [&](auto kernel_few, auto kernel_many, dim3 grid, const ExpertRowsArgs& args, const char* op) {
    launch(op, few ? kernel_few : kernel_many, grid, block, 0, args);
  };
  if (bound->dtype == DType::bf16) {
    rows(expert_rows_kernel<__nv_bfloat16, true, 4>, expert_rows_kernel<__nv_bfloat16, true, 1>, gate_up_grid, gate_up,
         "expert_mlps: gate/up");
    rows(expert_rows_kernel<__nv_bfloat16, false, 4>, expert_rows_kernel<__nv_bfloat16, false, 1>, down_grid, down,
         "expert_mlps: down");
  } else {
    rows(expert_rows_kernel<float, true, 4>, expert_rows_kernel<float, true, 1>, gate_up_grid, gate_up,
         "expert_mlps: gate/up");
    rows(expert_rows_kernel<float, false, 4>, expert_rows_kernel<float, false, 1>, down_grid, down,
         "expert_mlps: down");
  }
  const dim3 combine_grid(unsigned(t), unsigned((hidden + kCombineThreads - 1) / kCombineThreads));
  launch("expert_mlps: combine", expert_combine_kernel, combine_grid, kCombineThreads, 0, out.data<float>(),
         ids.data<int32_t>(), weights.data<float>(), int(k), int(e), hidden, y.data<float>());
}

}  // namespace fathom::cuda
