// The draws of rows whose rule ranks its candidates (top-k, top-p) made on
// the device as cpu::pick_candidates and cpu::pick_token make them: the
// places ranked by value (logit / temperature, NaN as −inf), then by id; the
// first top_k of them; of those, the fewest whose probabilities reach top_p;
// less those below min_p × the best's; then the first whose running sum, in
// rank order, passes the uniform.
//
// Nothing is sorted. Each of the three cuts (the top_k-th place, the place
// at which the nucleus reaches top_p, the place the draw lands on) is the
// first place, in rank order, at which a running sum over the places reaches
// a target: a count for top-k, probability mass for the others. It is found
// a digit of the value's 32 order bits at a time, from the top (11, 11, 10
// bits): a histogram of the sum over the places whose higher digits are
// those chosen so far, scanned from the largest digit down, says in which
// bin the sum reaches the target; last, among the places of exactly that
// value, in id order. Four passes over the row a cut, the last three
// weighing only the places still in play. The masses are integers (a weight
// exp(x / t − max) in [0, 1] as a count of 2^-44), so every sum is exact in
// whatever order the block's atomics add: a draw is the same every run, and
// a pass's bins add up to the bin they refine. That rounding, and the order
// of the host's sums, are where a draw can differ from the host's: only
// where its uniform (or top_p) falls within ~1e-12 of a candidate's bound.
//
// One block a ranked row, whose row stays in L2 after the first pass; the
// other rows' blocks return at once, so that a step's kernels are the same
// whichever rules its rows have (its graph is replayed, not captured anew).
// A block reading a whole row twelve times is slow: on an H100, a decode
// step of a 128k vocabulary took ~0.4 ms more with top-k 40 and ~0.7 ms more
// with top-p 0.9 over a flat row than an unranked draw, and a row of many
// equal values queues its atomics on one bin (milliseconds). Spreading a row
// over a cluster of blocks, each with loads in flight and a thread's run of
// one bin added at once, is the next step (not yet run on a GPU).
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/pick_order.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kBins = 2048;  // of an 11-bit digit
using Sum = unsigned long long;
constexpr double kMassUnit = 0x1p44;  // rows of < 2^20 places: a sum of weights ≤ 1 fits 64 bits
constexpr int64_t kMaxRankedRow = int64_t(1) << 20;

// A place in rank order. At or above it: a larger value, or its value and an
// id no larger. The default cut has every place at or above it.
struct Cut {
  uint32_t value = 0;
  uint32_t id = 0xffffffffu;
};

__device__ __forceinline__ bool at_or_above(uint32_t value, int64_t id, Cut c) {
  return value > c.value || (value == c.value && uint32_t(id) <= c.id);
}

// A place's value in rank order (NaN as −inf, as the host ranks it).
__device__ __forceinline__ uint32_t rank_value(float y) { return ordered_bits(sampled_value(y)); }

// A weight (draw_weight) as a mass.
__device__ __forceinline__ Sum mass(double w) { return Sum(llrint(w * kMassUnit)); }

// A ranked row: x / temperature, and its best value.
struct RankedRow {
  const float* x;
  int64_t n;
  float temperature;
  float top;
  __device__ float at(int64_t i) const { return x[i] / temperature; }
};

// What a block's cut keeps in shared memory.
struct CutScratch {
  Sum bins[kBins];
  Sum warps[kThreads / 32];
  Sum above;
  uint32_t digit, id;
};

// The first place, in rank order, at which the running sum of
// measure(place, value / temperature, rank value) reaches target_of(total),
// total being the whole row's sum (the target must lie in [1, total]).
template <typename Measure, typename Target>
__device__ Cut first_reaching(const RankedRow& r, Measure measure, Target target_of, CutScratch& s) {
  uint32_t prefix = 0;  // the digits chosen so far
  Sum above = 0;        // the sum over the places ranked before the chosen bins
  Sum target = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0, width = pass == 2 ? 10 : 11;
    for (int b = threadIdx.x; b < kBins; b += kThreads) s.bins[b] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < r.n; i += kThreads) {
      const float y = r.at(i);
      const uint32_t v = rank_value(y);
      if (pass > 0 && v >> (shift + width) != prefix) continue;
      if (const Sum m = measure(i, y, v)) atomicAdd(&s.bins[(v >> shift) & ((1u << width) - 1)], m);
    }
    __syncthreads();
    // Thread t holds bins kBins − 1 − 2t and the one below: the sum runs from
    // the largest digit down. Exactly one bin takes the sum to the target.
    const int hi = kBins - 1 - 2 * int(threadIdx.x);
    const Sum a = s.bins[hi], b = s.bins[hi - 1];
    Sum total;
    const Sum before = above + block_exclusive_sum<kThreads>(a + b, s.warps, total);
    if (pass == 0) target = target_of(total);
    if (before < target && before + a >= target)
      s.digit = uint32_t(hi), s.above = before;
    else if (before + a < target && before + a + b >= target)
      s.digit = uint32_t(hi - 1), s.above = before + a;
    __syncthreads();
    prefix = prefix << width | s.digit;
    above = s.above;
    __syncthreads();  // every thread has read s before the next pass writes it
  }
  // Among the places of exactly that value, in id order: thread t walks a
  // run of ids, the sum before its run being above and the runs' before it.
  const int64_t per = (r.n + kThreads - 1) / kThreads;
  const int64_t from = std::min(r.n, int64_t(threadIdx.x) * per), to = std::min(r.n, from + per);
  Sum mine = 0;
  for (int64_t i = from; i < to; ++i) {
    const float y = r.at(i);
    if (const uint32_t v = rank_value(y); v == prefix) mine += measure(i, y, v);
  }
  Sum total;
  Sum acc = above + block_exclusive_sum<kThreads>(mine, s.warps, total);
  if (acc < target && acc + mine >= target)
    for (int64_t i = from; i < to; ++i) {
      const float y = r.at(i);
      const uint32_t v = rank_value(y);
      if (v != prefix) continue;
      acc += measure(i, y, v);
      if (acc >= target) {
        s.id = uint32_t(i);
        break;
      }
    }
  __syncthreads();
  const Cut cut{prefix, s.id};
  __syncthreads();
  return cut;
}

// Block r draws row r where its rule ranks (ids[r] holds the best of
// x / temperature, which an infinite best value keeps: it takes all the mass).
__global__ void draw_ranked_kernel(const float* x, int64_t n, const PickRule* rules, int32_t* ids) {
  await_previous_kernel();
  const int64_t row = blockIdx.x;
  const PickRule rule = rules[row];
  if (!draws_ranked(rule, n)) return;
  const int32_t best = ids[row];
  const float* xr = x + row * n;
  const RankedRow r{xr, n, rule.temperature, xr[best] / rule.temperature};
  if (!isfinite(r.top)) return;
  __shared__ CutScratch s;
  Cut top_k;
  if (rule.top_k > 0 && rule.top_k < n)
    top_k = first_reaching(
        r, [](int64_t, float, uint32_t) { return Sum(1); }, [&](Sum) { return Sum(rule.top_k); }, s);
  Cut top_p;
  if (rule.top_p < 1.0f)
    top_p = first_reaching(
        r, [&](int64_t i, float y, uint32_t v) { return at_or_above(v, i, top_k) ? mass(draw_weight(y, r.top)) : Sum(0); },
        [&](Sum total) { return std::clamp(Sum(ceil(double(rule.top_p) * double(total))), Sum(1), total); }, s);
  // The candidates: at or above both cuts, of a weight not 0, and not below
  // min_p × the best's weight (1) unless the best.
  const auto kept = [&](int64_t i, float y, uint32_t v) {
    if (!at_or_above(v, i, top_k) || !at_or_above(v, i, top_p)) return Sum(0);
    const double w = draw_weight(y, r.top);
    return w == 0.0 || (i != best && w < rule.min_p) ? Sum(0) : mass(w);
  };
  // The first candidate whose running sum passes uniform × the candidates' sum.
  const Cut drawn =
      first_reaching(r, kept, [&](Sum total) { return std::min(total, Sum(rule.uniform * double(total)) + 1); }, s);
  if (threadIdx.x == 0) ids[row] = int32_t(drawn.id);
}

}  // namespace

void CudaBackend::draw_ranked_rows(const float* x, int64_t rows, int64_t n, std::span<const PickRule> rules,
                                   const PickRule* dev_rules, int32_t* ids) {
  for (const PickRule& r : rules)
    check(!draws_ranked(r, n) || n < kMaxRankedRow, "pick_rows: a top-k or top-p draw from rows of ", n,
          " values (at most ", kMaxRankedRow - 1, ")");
  launch("pick_rows", draw_ranked_kernel, unsigned(rows), kThreads, 0, x, n, dev_rules, ids);
}

}  // namespace fathom::cuda
