// The token of every row of a step's logits, picked on the device: only the
// ids go back to the host, not rows of a whole vocabulary (128k floats a row
// for Llama 3). First each row's best (of logits / temperature where its rule
// samples): the row is cut into spans, one block each, so that a single row
// is read by many multiprocessors, and a second kernel takes each row's best
// span. A value and its index travel as one 64-bit key whose order is the
// pick's: the larger value first, then the lower index (cpu::argmax's rule).
// Then, for each row that samples, a block a span sums its weights, and a
// block a row finds the span where the running sum passes the uniform and
// walks it as cpu::pick_token does (the same steps, in double; sums in
// another order, so a draw can differ from the host's only where its uniform
// falls within rounding of a candidate's bound). Rows whose rule ranks its
// candidates (top-k, top-p) are drawn by pick_ranked.cu's kernel instead.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/pick_order.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSpan = 4096;  // values of a row a block reads, or more where a row
constexpr int kMaxSpans = 64;    // would take more spans than this

// 0 for a NaN (never picked: every other key is larger); otherwise the
// value's ordered bits in the high half, and the index counted down in the
// low half.
__device__ __forceinline__ uint64_t pick_key(float v, int64_t i) {
  if (isnan(v)) return 0;
  return uint64_t(ordered_bits(v)) << 32 | (0xffffffffu - uint32_t(i));
}

__device__ __forceinline__ uint64_t warp_max(uint64_t k) {
  for (int o = 16; o > 0; o >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, o));
  return k;
}

// Block (s, r): the best key of span s of row r (of x / temperature where
// the row's rule samples, a NaN then ranked as −inf as the host sampler
// ranks it) into keys[r · spans + s].
__global__ void argmax_spans_kernel(const float* x, int64_t n, int64_t span, const PickRule* rules, uint64_t* keys) {
  await_previous_kernel();
  const int64_t row = blockIdx.y, begin = int64_t(blockIdx.x) * span, end = std::min(n, begin + span);
  const float* xr = x + row * n;
  const float t = rules[row].temperature;
  uint64_t best = 0;
  if (t == 0.0f) {
#pragma unroll 4
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) best = max(best, pick_key(xr[i], i));
  } else {
#pragma unroll 4
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
      const float y = xr[i] / t;
      best = max(best, pick_key(sampled_value(y), i));
    }
  }
  __shared__ uint64_t warps[kThreads / 32];
  best = warp_max(best);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = warp_max(threadIdx.x < kThreads / 32 ? warps[threadIdx.x] : 0);
    if (threadIdx.x == 0) keys[row * gridDim.x + blockIdx.x] = best;
  }
}

// A warp per row: the best of its spans' keys, made an index again (a row
// of NaNs picks 0).
__global__ void argmax_pick_kernel(const uint64_t* keys, int spans, int64_t rows, int32_t* ids) {
  await_previous_kernel();
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  uint64_t best = 0;
  for (int s = lane; s < spans; s += 32) best = max(best, keys[row * spans + s]);
  best = warp_max(best);
  if (lane == 0) ids[row] = best == 0 ? 0 : int32_t(0xffffffffu - uint32_t(best));
}

// A sampled row's candidates: best first, then in id order with the best's
// place taken by id 0 (the host sampler's order).
__device__ __forceinline__ int32_t id_at(int64_t i, int32_t best) {
  return i == 0 ? best : i == best ? 0 : int32_t(i);
}

// Row r as the draw kernels read it: drawn from when its rule samples
// unranked and its best logit / temperature (`top`) is finite (an infinite
// one takes all the mass: the best stays the pick).
struct DrawnRow {
  PickRule rule;
  const float* x;
  int32_t best;
  float top;
  bool drawn;
};

__device__ DrawnRow drawn_row(const float* x, int64_t n, int64_t row, const PickRule* rules, const int32_t* ids) {
  DrawnRow d{rules[row], x + row * n, 0, 0.0f, false};
  if (d.rule.temperature == 0.0f || draws_ranked(d.rule, n)) return d;
  d.best = ids[row];
  d.top = d.x[d.best] / d.rule.temperature;
  d.drawn = isfinite(d.top);
  return d;
}

// The weight exp(x / t − top) at place i (draw_weight).
__device__ __forceinline__ double weight_at(const DrawnRow& d, int64_t i) {
  return draw_weight(d.x[id_at(i, d.best)] / d.rule.temperature, d.top);
}

// What a span of a sampled row holds: its weights exp(x / t − max) summed,
// those of its kept candidates (weight ≥ min_p, the best's weight being 1)
// summed, and its last kept place (−1: none).
struct SpanMass {
  double weights, kept;
  int64_t last;
};

// Block (s, r): span s of row r's SpanMass, where the row's rule samples
// (ids[r] holds the best of x / temperature).
__global__ void draw_spans_kernel(const float* x, int64_t n, int64_t span, const PickRule* rules, const int32_t* ids,
                                  SpanMass* mass) {
  await_previous_kernel();
  const int64_t row = blockIdx.y;
  const DrawnRow d = drawn_row(x, n, row, rules, ids);
  if (!d.drawn) return;
  const int64_t begin = int64_t(blockIdx.x) * span, end = std::min(n, begin + span);
  double weights = 0.0, kept = 0.0;
  long long last = -1;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double w = weight_at(d, i);
    weights += w;
    if (w != 0.0 && (i == 0 || w >= d.rule.min_p)) kept += w, last = i;
  }
  for (int o = 16; o > 0; o >>= 1) {
    weights += __shfl_xor_sync(0xffffffffu, weights, o);
    kept += __shfl_xor_sync(0xffffffffu, kept, o);
    last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  }
  __shared__ SpanMass warps[kThreads / 32];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = {weights, kept, last};
  __syncthreads();
  if (threadIdx.x == 0) {
    SpanMass m = warps[0];
    for (int w = 1; w < kThreads / 32; ++w)
      m.weights += warps[w].weights, m.kept += warps[w].kept, m.last = max(m.last, warps[w].last);
    mass[row * gridDim.x + blockIdx.x] = m;
  }
}

// Block r draws row r's token where its rule samples, as cpu::pick_token
// does: the probabilities p = weight / Σ weights, the candidates whose p is
// not 0 and not below min_p × the best's kept, the first whose normalized
// running sum passes the uniform picked. The spans' masses say in which span
// that happens; there each thread walks a run of places, the sum before its
// run being the spans' and the runs' before it.
__global__ void draw_rows_kernel(const float* x, int64_t n, int64_t span, int spans, const PickRule* rules,
                                 const SpanMass* mass, int32_t* ids) {
  await_previous_kernel();
  const int64_t row = blockIdx.x;
  const DrawnRow d = drawn_row(x, n, row, rules, ids);
  if (!d.drawn) return;
  const PickRule& rule = d.rule;
  const SpanMass* m = mass + row * spans;
  double total = 0.0, kept = 0.0;
  int64_t last = 0;
  for (int s = 0; s < spans; ++s) total += m[s].weights, kept += m[s].kept, last = max(last, m[s].last);
  const double threshold = rule.min_p * 1.0 / total, kept_total = kept / total;
  int s = 0;
  double before = 0.0;  // the normalized running sum before span s
  for (; s < spans - 1; ++s) {
    const double next = before + m[s].kept / total / kept_total;
    if (rule.uniform < next) break;
    before = next;
  }
  __shared__ double warps[kThreads / 32];
  __shared__ unsigned long long chosen;
  if (threadIdx.x == 0) chosen = (unsigned long long)n;
  // Span s, then the next ones should rounding leave the crossing past it.
  for (; s < spans; ++s) {
    const int64_t begin = int64_t(s) * span, end = std::min(n, begin + span), per = (span + kThreads - 1) / kThreads;
    const int64_t from = std::min(end, begin + threadIdx.x * per), to = std::min(end, from + per);
    const auto p_at = [&](int64_t i) { return weight_at(d, i) / total; };
    const auto kept_at = [&](int64_t i, double p) { return p != 0.0 && (i == 0 || p >= threshold); };
    double mine = 0.0;
    for (int64_t i = from; i < to; ++i)
      if (const double p = p_at(i); kept_at(i, p)) mine += p / kept_total;
    double span_sum = 0.0;
    double acc = before + block_exclusive_sum<kThreads>(mine, warps, span_sum);
    if (acc <= rule.uniform)
      for (int64_t i = from; i < to; ++i) {
        const double p = p_at(i);
        if (!kept_at(i, p)) continue;
        acc += p / kept_total;
        if (rule.uniform < acc) {
          atomicMin(&chosen, (unsigned long long)i);
          break;
        }
      }
    __syncthreads();
    if (chosen < (unsigned long long)n) break;
    before += span_sum;
  }
  if (threadIdx.x == 0) ids[row] = id_at(chosen < (unsigned long long)n ? int64_t(chosen) : last, d.best);
}

}  // namespace

void CudaBackend::pick_rows_impl(const Tensor& x, std::span<const PickRule> rules, Tensor& ids) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  if (rows == 0) return;
  check(n <= int64_t(INT32_MAX), "pick_rows: rows of ", n, " values (at most 2^31 - 1)");
  check(rows <= 65535, "pick_rows: ", rows, " rows at once (at most 65535)");
  const int spans = int(std::min<int64_t>((n + kSpan - 1) / kSpan, kMaxSpans));
  const int64_t span = (n + spans - 1) / spans;
  const size_t key_bytes = size_t(rows * spans) * sizeof(uint64_t);
  auto* keys = static_cast<uint64_t*>(scratch(kPartials, key_bytes + size_t(rows * spans) * sizeof(SpanMass)));
  auto* mass = reinterpret_cast<SpanMass*>(reinterpret_cast<char*>(keys) + key_bytes);
  const auto* dev_rules = static_cast<const PickRule*>(stage(kPickRules, rules.data(), rules.size_bytes()));
  int32_t* out = ids.data<int32_t>();
  launch("pick_rows", argmax_spans_kernel, dim3(unsigned(spans), unsigned(rows)), kThreads, 0, x.data<float>(), n,
         span, dev_rules, keys);
  launch("pick_rows", argmax_pick_kernel, unsigned((rows * 32 + kThreads - 1) / kThreads), kThreads, 0,
         static_cast<const uint64_t*>(keys), spans, rows, out);
  // Launched for greedy steps too (their blocks return at once): a step's
  // kernels stay the same whichever rules its rows have, so its graph is
  // replayed, not captured anew, when sampled rows come and go.
  launch("pick_rows", draw_spans_kernel, dim3(unsigned(spans), unsigned(rows)), kThreads, 0, x.data<float>(), n, span,
         dev_rules, static_cast<const int32_t*>(out), mass);
  launch("pick_rows", draw_rows_kernel, unsigned(rows), kThreads, 0, x.data<float>(), n, span, spans, dev_rules,
         static_cast<const SpanMass*>(mass), out);
  draw_ranked_rows(x.data<float>(), rows, n, rules, dev_rules, out);
}

}  // namespace fathom::cuda
