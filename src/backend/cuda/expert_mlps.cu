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
#include <type_traits>
#include <vector>

#include "backend/cuda/activations.h"
#include "backend/cuda/affine_launch.h"
#include "backend/cuda/bf16_vectors.h"
#include "backend/cuda/cuda_backend.h"

namespace fathom::cuda {

// How a bank's weights are stored: plain bf16 or f32, or MLX's affine codes
// of 4 or 8 bits (scale·q + bias per group along a row).
enum class ExpertFormat : int { bf16, f32, q4, q8 };

// What bind_experts keeps of a bank: tables of every expert's weight
// addresses on the device — the matrices (codes) gate[E], up[E], down[E],
// then for affine formats their scales and biases in the same order — and
// the format.
struct DeviceExperts {
  Tensor table;
  ExpertFormat format = ExpertFormat::f32;
  affine::ParamType params = affine::ParamType::f32;
  int group = 0;
  int64_t count = 0;
  bool coded() const { return format == ExpertFormat::q4 || format == ExpertFormat::q8; }
  // part: 0 data, 1 scales, 2 biases (null for plain formats); matrix: 0 gate, 1 up, 2 down.
  const void* const* at(int part, int matrix) const {
    if (part > 0 && !coded()) return nullptr;
    return static_cast<const void* const*>(table.raw()) + (3 * part + matrix) * count;
  }
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

// One expert matrix as the kernel finds it: per expert, its data (values,
// or codes) and for affine formats its scales and biases.
struct ExpertMatrix {
  const void* const* data;
  const void* const* scales;
  const void* const* biases;
};

// The stored form of 8 consecutive values of a row (one lane's chunk),
// loaded ahead and widened when used (see expert_rows_kernel).
template <ExpertFormat F>
struct Chunk;
template <>
struct Chunk<ExpertFormat::bf16> {
  uint4 v;
};
template <>
struct Chunk<ExpertFormat::f32> {
  float4 lo, hi;
};
template <>
struct Chunk<ExpertFormat::q4> {
  uint32_t codes, scale, bias;  // the scale's and bias's stored bits
};
template <>
struct Chunk<ExpertFormat::q8> {
  uint2 codes;
  uint32_t scale, bias;
};

// Row f's chunk at column c of a matrix [N, K] (c a multiple of 8; an affine
// group holds whole chunks: group sizes are multiples of 32).
template <ExpertFormat F>
__device__ __forceinline__ Chunk<F> load_chunk(const void* data, const void* scales, const void* biases, int64_t f,
                                               int64_t c, int64_t k, int group, affine::ParamType params) {
  Chunk<F> ch;
  if constexpr (F == ExpertFormat::bf16) {
    ch.v = __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(data) + f * k + c));
  } else if constexpr (F == ExpertFormat::f32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(data) + f * k + c);
    ch.lo = __ldg(p), ch.hi = __ldg(p + 1);
  } else {
    if constexpr (F == ExpertFormat::q4) ch.codes = __ldg(static_cast<const uint32_t*>(data) + (f * k + c) / 8);
    else ch.codes = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint32_t*>(data) + (f * k + c) / 4));
    const uint32_t at = uint32_t(f * (k / group) + c / group);
    ch.scale = affine::param_bits(scales, params, at);
    ch.bias = affine::param_bits(biases, params, at);
  }
  return ch;
}

// acc + Σ w_j·x_j over the chunk's 8 values; sx = Σ x_j (affine formats:
// Σ (s·q_j + b)·x_j taken as s·Σ q_j·x_j + b·Σ x_j).
template <ExpertFormat F>
__device__ __forceinline__ float dot_chunk(const Chunk<F>& ch, const float x[8], float sx, float acc,
                                           affine::ParamType params) {
  if constexpr (F == ExpertFormat::bf16 || F == ExpertFormat::f32) {
    float w[8];
    if constexpr (F == ExpertFormat::bf16) {
      widen_bf16x8(ch.v, w);
    } else {
      w[0] = ch.lo.x, w[1] = ch.lo.y, w[2] = ch.lo.z, w[3] = ch.lo.w;
      w[4] = ch.hi.x, w[5] = ch.hi.y, w[6] = ch.hi.z, w[7] = ch.hi.w;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) acc = fmaf(w[j], x[j], acc);
    return acc;
  } else {
    // A code becomes a float as the low bits of 2^23's mantissa, less 2^23
    // (exact; a shift, a mask-and-or and a subtraction instead of the
    // conversion unit's slow I2F).
    float qx = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t q;
      if constexpr (F == ExpertFormat::q4) q = (ch.codes >> (4 * j)) & 15u;
      else q = ((j < 4 ? ch.codes.x : ch.codes.y) >> (8 * (j % 4))) & 255u;
      qx = fmaf(__uint_as_float(0x4B000000u | q) - 8388608.0f, x[j], qx);
    }
    return fmaf(affine::param_value(ch.scale, params), qx, fmaf(affine::param_value(ch.bias, params), sx, acc));
  }
}

struct ExpertRowsArgs {
  ExpertMatrix first;   // gate (gated) or down, [N, K] an expert
  ExpertMatrix second;  // up [N, K] (gated only)
  PlanView plan;
  const float* in;  // [*, K]: pair p reads row p / in_div
  int in_div;
  float* out;  // [pairs, N]: pair p's row
  int64_t n, k;
  int group;  // affine formats
  affine::ParamType params;
  bool round_inputs;  // bf16 compute: the inputs rounded to bf16 as every matmul rounds them
  bool gelu;          // gated: GELU-tanh, else SiLU
};

// One warp an output column f of one picked expert; lane l reads 8
// consecutive weights at 8·l + 256·j, for up to kPairsAtOnce pairs at a time,
// kUnroll chunks' weights loaded before any is used. Decode's few rows an
// expert want 4 loads a lane in flight (a 30B-A3B-shape step: 2.03 → 1.30 ms);
// a wide batch's several pairs an expert keep the GPU busy with 1, and 4
// costs it registers (64 rows: 13.4 → 16.2 ms).
template <ExpertFormat F, bool kGated, int kUnroll>
__global__ void expert_rows_kernel(ExpertRowsArgs a) {
  constexpr bool kAffine = F == ExpertFormat::q4 || F == ExpertFormat::q8;
  await_previous_kernel();
  const int g = blockIdx.x;
  if (g >= a.plan.groups()) return;
  const int64_t f = int64_t(blockIdx.y) * kColumnsPerBlock + threadIdx.x / 32;
  if (f >= a.n) return;
  const int e = a.plan.expert(g), first = a.plan.begin(g), last = a.plan.begin(g + 1);
  const int lane = threadIdx.x % 32;
  const void* d0 = a.first.data[e];
  const void* s0p = kAffine ? a.first.scales[e] : nullptr;
  const void* b0p = kAffine ? a.first.biases[e] : nullptr;
  const void* d1 = kGated ? a.second.data[e] : nullptr;
  const void* s1p = kGated && kAffine ? a.second.scales[e] : nullptr;
  const void* b1p = kGated && kAffine ? a.second.biases[e] : nullptr;
  for (int p0 = first; p0 < last; p0 += kPairsAtOnce) {
    const int np = min(kPairsAtOnce, last - p0);
    const float* x[kPairsAtOnce];
#pragma unroll
    for (int i = 0; i < kPairsAtOnce; ++i) x[i] = a.in + int64_t(a.plan.pair(p0 + min(i, np - 1)) / a.in_div) * a.k;
    float acc0[kPairsAtOnce] = {}, acc1[kPairsAtOnce] = {};
    for (int64_t c0 = 8 * lane; c0 < a.k; c0 += 256 * kUnroll) {
      Chunk<F> wa[kUnroll], wb[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + 256 * u;
        if (c >= a.k) break;
        wa[u] = load_chunk<F>(d0, s0p, b0p, f, c, a.k, a.group, a.params);
        if constexpr (kGated) wb[u] = load_chunk<F>(d1, s1p, b1p, f, c, a.k, a.group, a.params);
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
          float sx = 0.0f;
          if constexpr (kAffine)
#pragma unroll
            for (int j = 0; j < 8; ++j) sx += xv[j];
          acc0[i] = dot_chunk<F>(wa[u], xv, sx, acc0[i], a.params);
          if constexpr (kGated) acc1[i] = dot_chunk<F>(wb[u], xv, sx, acc1[i], a.params);
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
  if (bank.count() == 0) return;
  const Tensor& g0 = bank.gate[0];
  const int64_t inter = g0.dim(0), hidden = g0.dim(1);
  auto bound = std::make_shared<DeviceExperts>();
  bound->count = bank.count();
  bool fits = hidden % 8 == 0 && inter % 8 == 0;
  switch (g0.dtype()) {
    case DType::bf16: bound->format = ExpertFormat::bf16; break;
    case DType::f32: bound->format = ExpertFormat::f32; break;
    case DType::affine: {
      const AffineQuant& q = g0.affine_quant();
      fits = fits && (q.bits == 4 || q.bits == 8);
      bound->format = q.bits == 4 ? ExpertFormat::q4 : ExpertFormat::q8;
      bound->group = q.group_size;
      bound->params = affine::param_type(q.scales.dtype());
      break;
    }
    default: fits = false;
  }
  const bool coded = g0.dtype() == DType::affine;
  std::vector<const void*> data, scales, biases;
  for (const std::vector<Tensor>* list : {&bank.gate, &bank.up, &bank.down})
    for (const Tensor& w : *list) {
      fits = fits && w.dtype() == g0.dtype() && w.rank() == 2;
      if (!fits) break;
      if (coded) {
        const AffineQuant& q = w.affine_quant();
        fits = q.bits == g0.affine_quant().bits && q.group_size == bound->group &&
               q.scales.dtype() == g0.affine_quant().scales.dtype() && q.biases.dtype() == q.scales.dtype() &&
               q.group_size % 8 == 0;
        scales.push_back(q.scales.raw());
        biases.push_back(q.biases.raw());
      }
      // 16-byte loads of plain rows; 8-byte loads of 8-bit codes (4-bit ones are words).
      fits = fits && (coded ? reinterpret_cast<uintptr_t>(w.raw()) % 8 == 0 : aligned16(w.raw()));
      data.push_back(w.raw());
    }
  if (!fits) {
    ++unbound_expert_banks_;  // other code widths, mixed formats, odd widths: the host's routing
    return;
  }
  data.insert(data.end(), scales.begin(), scales.end());
  data.insert(data.end(), biases.begin(), biases.end());
  Tensor host = Tensor::empty({int64_t(data.size() * sizeof(void*) / 4)}, DType::u32);
  std::copy(data.begin(), data.end(), static_cast<const void**>(host.raw()));
  bound->table = upload_impl(host);
  bank.device = std::move(bound);
}

bool CudaBackend::experts_on_device(int64_t rows) const {
  return unbound_expert_banks_ == 0 && rows <= kExpertRowsOnDevice;
}

void CudaBackend::expert_mlps_impl(const ExpertBank& bank, const Tensor& x, const Tensor& ids, const Tensor& weights,
                                   Tensor& y, bool bf16_inputs) {
  ctx_->release_before_wait = false;  // measured before the integer GEMV only (cuda_backend.h)
  const int64_t t = x.dim(0), k = ids.dim(1), n = t * k;
  const auto* bound = static_cast<const DeviceExperts*>(bank.device.get());
  if (!bound || t > kExpertRowsOnDevice || n > kPlanMaxPairs || k > 32)
    return Backend::expert_mlps_impl(bank, x, ids, weights, y, bf16_inputs);
  const int64_t e = bank.count(), hidden = x.dim(1), inter = bank.gate[0].dim(0);
  const int gmax = int(std::min(e, n));
  Tensor plan = empty_impl({n + 2 * gmax + 2}, DType::i32);
  Tensor act = empty_impl({n, inter}, DType::f32), out = empty_impl({n, hidden}, DType::f32);
  launch("expert_mlps: plan", expert_plan_kernel, 1, unsigned((n + 31) / 32 * 32), 0, ids.data<int32_t>(), int(n),
         int(e), gmax, plan.data<int32_t>());
  const PlanView view{plan.data<int32_t>(), gmax};
  const ExpertMatrix gate{bound->at(0, 0), bound->at(1, 0), bound->at(2, 0)};
  const ExpertMatrix up{bound->at(0, 1), bound->at(1, 1), bound->at(2, 1)};
  const ExpertMatrix down_m{bound->at(0, 2), bound->at(1, 2), bound->at(2, 2)};
  const bool gelu = bank.act == GateActivation::gelu_tanh;
  const ExpertRowsArgs gate_up{gate, up, view, x.data<float>(), int(k), act.data<float>(), inter, hidden, bound->group,
                               bound->params, bf16_inputs, gelu};
  const ExpertRowsArgs down{down_m, {}, view, act.data<float>(), 1, out.data<float>(), hidden, inter, bound->group,
                            bound->params, bf16_inputs, false};
  const dim3 block(32 * kColumnsPerBlock);
  const dim3 gate_up_grid(unsigned(gmax), unsigned((inter + kColumnsPerBlock - 1) / kColumnsPerBlock));
  const dim3 down_grid(unsigned(gmax), unsigned((hidden + kColumnsPerBlock - 1) / kColumnsPerBlock));
  // Decode-like: about one pair an expert (see expert_rows_kernel).
  const bool few = n <= 2 * gmax;
  auto run = [&](auto format) {
    constexpr ExpertFormat F = decltype(format)::value;
    launch("expert_mlps: gate/up", few ? expert_rows_kernel<F, true, 4> : expert_rows_kernel<F, true, 1>,
           gate_up_grid, block, 0, gate_up);
    launch("expert_mlps: down", few ? expert_rows_kernel<F, false, 4> : expert_rows_kernel<F, false, 1>, down_grid,
           block, 0, down);
  };
  switch (bound->format) {
    case ExpertFormat::bf16: run(std::integral_constant<ExpertFormat, ExpertFormat::bf16>{}); break;
    case ExpertFormat::f32: run(std::integral_constant<ExpertFormat, ExpertFormat::f32>{}); break;
    case ExpertFormat::q4: run(std::integral_constant<ExpertFormat, ExpertFormat::q4>{}); break;
    case ExpertFormat::q8: run(std::integral_constant<ExpertFormat, ExpertFormat::q8>{}); break;
  }
  const dim3 combine_grid(unsigned(t), unsigned((hidden + kCombineThreads - 1) / kCombineThreads));
  launch("expert_mlps: combine", expert_combine_kernel, combine_grid, kCombineThreads, 0, out.data<float>(),
         ids.data<int32_t>(), weights.data<float>(), int(k), int(e), hidden, y.data<float>());
}

}  // namespace fathom::cuda
