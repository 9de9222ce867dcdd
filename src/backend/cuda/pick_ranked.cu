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
// On Hopper a cluster of 8 blocks a ranked row, each weighing a part of it;
// the blocks add up each other's histograms in shared memory (distributed
// shared memory) and so choose the same digits. Built for an older GPU (the
// PTX of a default build), one block a row. A thread adds a run of places
// that fall in one bin with one atomic: most places of a flat row (or a row
// of one value) fall in a few bins. Against one block a row without those
// runs, on an H200 (ncu, the op suite's 18 rows of each length, degenerate
// rows among them): 4,097 places 560 → 215 µs, 70,001 9.06 ms → 304 µs,
// 151,936 19.7 ms → 417 µs; rows of 1 and 7 places 31 → 129 and 42 → 187
// µs (a cluster's syncs). The other rows' blocks return at once, so that a
// step's kernels are the same whichever rules its rows have (its graph is
// replayed, not captured anew).
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/pick_order.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 1024;
constexpr int kUnroll = 4;  // loads a thread has in flight
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

// A ranked row as one of its blocks reads it: x / temperature, the
// best value, and the block's part [begin, end).
struct RankedRow {
  const float* x;
  float temperature;
  float top;
  int64_t begin, end;
};

// visit(place, x / temperature) for each place of the block's part, each
// thread with kUnroll loads in flight.
template <typename Visit>
__device__ __forceinline__ void for_each_place(const RankedRow& r, Visit visit) {
  for (int64_t base = r.begin + threadIdx.x; base < r.end; base += kUnroll * kThreads) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + int64_t(u) * kThreads;
      x[u] = i < r.end ? r.x[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (const int64_t i = base + int64_t(u) * kThreads; i < r.end) visit(i, x[u] / r.temperature);
  }
}

// The blocks of a row: a cluster where the GPU has them (the kernel's
// cluster size, which the host reads back to size the grid), else one.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FATHOM_ROW_CLUSTER __cluster_dims__(8, 1, 1)
struct RowBlocks {
  cg::cluster_group cluster = cg::this_cluster();
  __device__ unsigned size() const { return cluster.num_blocks(); }
  __device__ unsigned rank() const { return cluster.block_rank(); }
  __device__ void sync() const { cluster.sync(); }
  // p, an address of this block's shared memory, in block `rank`'s.
  template <typename T>
  __device__ T* at(T* p, unsigned rank) const { return cluster.map_shared_rank(p, rank); }
};
#else
#define FATHOM_ROW_CLUSTER
struct RowBlocks {
  __device__ unsigned size() const { return 1; }
  __device__ unsigned rank() const { return 0; }
  __device__ void sync() const { __syncthreads(); }
  template <typename T>
  __device__ T* at(T* p, unsigned) const { return p; }
};
#endif

// What a block keeps in shared memory for a cut; a row's blocks read
// each other's.
struct CutScratch {
  Sum bins[kBins];
  Sum warps[kThreads / 32];
  Sum above, part_sum;
  uint32_t digit, id;
};

// The first place, in rank order, at which the running sum of
// measure(place, value / temperature, rank value) reaches target_of(total),
// total being the whole row's sum (the target must lie in [1, total]). Every
// block of the row calls it and gets the same place.
template <typename Measure, typename Target>
__device__ Cut first_reaching(const RankedRow& r, Measure measure, Target target_of, CutScratch& s,
                              const RowBlocks& blocks) {
  uint32_t prefix = 0;  // the digits chosen so far
  Sum above = 0;        // the sum over the places ranked before the chosen bins
  Sum target = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0, width = pass == 2 ? 10 : 11;
    for (int b = threadIdx.x; b < kBins; b += kThreads) s.bins[b] = 0;
    __syncthreads();
    // A thread adds a run of places of one bin at once: most places of a
    // flat row fall in a few bins, and an atomic a place there would queue.
    uint32_t run_bin = 0;
    Sum run = 0;
    for_each_place(r, [&](int64_t i, float y) {
      const uint32_t v = rank_value(y);
      if (pass > 0 && v >> (shift + width) != prefix) return;
      const Sum m = measure(i, y, v);
      if (m == 0) return;
      const uint32_t bin = (v >> shift) & ((1u << width) - 1);
      if (bin != run_bin && run != 0) atomicAdd(&s.bins[run_bin], run), run = 0;
      run_bin = bin;
      run += m;
    });
    if (run != 0) atomicAdd(&s.bins[run_bin], run);
    blocks.sync();
    // Thread t holds bins kBins − 1 − 2t and the one below, summed over the
    // row's blocks: the sum runs from the largest digit down. Exactly one bin
    // takes it to the target.
    const int hi = kBins - 1 - 2 * int(threadIdx.x);
    Sum a = 0, b = 0;
    for (unsigned part = 0; part < blocks.size(); ++part) {
      const Sum* bins = blocks.at(&s.bins[0], part);
      a += bins[hi], b += bins[hi - 1];
    }
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
    blocks.sync();  // every block has read the others' bins before they are cleared
  }
  // Among the places of exactly that value, in id order: thread t of block p
  // walks a run of ids, the sum before its run being above, the blocks'
  // before p and the runs' before it in p.
  const int64_t per = (r.end - r.begin + kThreads - 1) / kThreads;
  const int64_t from = std::min(r.end, r.begin + int64_t(threadIdx.x) * per), to = std::min(r.end, from + per);
  const auto tie_measure = [&](int64_t i) {
    const float y = r.x[i] / r.temperature;
    const uint32_t v = rank_value(y);
    return v == prefix ? measure(i, y, v) : Sum(0);
  };
  Sum mine = 0;
  for (int64_t i = from; i < to; ++i) mine += tie_measure(i);
  Sum part_sum;
  Sum acc = above + block_exclusive_sum<kThreads>(mine, s.warps, part_sum);
  if (threadIdx.x == 0) s.part_sum = part_sum;
  blocks.sync();
  for (unsigned part = 0; part < blocks.rank(); ++part) acc += *blocks.at(&s.part_sum, part);
  if (acc < target && acc + mine >= target)
    for (int64_t i = from; i < to; ++i)
      if ((acc += tie_measure(i)) >= target) {
        *blocks.at(&s.id, 0) = uint32_t(i);
        break;
      }
  blocks.sync();
  return {prefix, *blocks.at(&s.id, 0)};
}

// Cluster r draws row r where its rule ranks (ids[r] holds the best of
// x / temperature, which an infinite best value keeps: it takes all the mass).
__global__ void FATHOM_ROW_CLUSTER __launch_bounds__(kThreads)
    draw_ranked_kernel(const float* x, int64_t n, const PickRule* rules, int32_t* ids) {
  await_previous_kernel();
  const RowBlocks blocks;
  const int64_t row = blockIdx.x / blocks.size();
  const PickRule rule = rules[row];
  if (!draws_ranked(rule, n)) return;
  const int32_t best = ids[row];
  const float* xr = x + row * n;
  const int64_t span = (n + blocks.size() - 1) / blocks.size(), begin = std::min(n, span * blocks.rank());
  const RankedRow r{xr, rule.temperature, xr[best] / rule.temperature, begin, std::min(n, begin + span)};
  if (!isfinite(r.top)) return;
  __shared__ CutScratch s;
  Cut top_k;
  if (rule.top_k > 0 && rule.top_k < n)
    top_k = first_reaching(
        r, [](int64_t, float, uint32_t) { return Sum(1); }, [&](Sum) { return Sum(rule.top_k); }, s, blocks);
  Cut top_p;
  if (rule.top_p < 1.0f)
    top_p = first_reaching(
        r, [&](int64_t i, float y, uint32_t v) { return at_or_above(v, i, top_k) ? mass(draw_weight(y, r.top)) : Sum(0); },
        [&](Sum total) { return std::clamp(Sum(ceil(double(rule.top_p) * double(total))), Sum(1), total); }, s,
        blocks);
  // The candidates: at or above both cuts, of a weight not 0, and not below
  // min_p × the best's weight (1) unless the best.
  const auto kept = [&](int64_t i, float y, uint32_t v) {
    if (!at_or_above(v, i, top_k) || !at_or_above(v, i, top_p)) return Sum(0);
    const double w = draw_weight(y, r.top);
    return w == 0.0 || (i != best && w < rule.min_p) ? Sum(0) : mass(w);
  };
  // The first candidate whose running sum passes uniform × the candidates' sum.
  const Cut drawn = first_reaching(
      r, kept, [&](Sum total) { return std::min(total, Sum(rule.uniform * double(total)) + 1); }, s, blocks);
  if (blocks.rank() == 0 && threadIdx.x == 0) ids[row] = int32_t(drawn.id);
  blocks.sync();  // no block leaves while another may still read its shared memory
}

}  // namespace

void CudaBackend::draw_ranked_rows(const float* x, int64_t rows, int64_t n, std::span<const PickRule> rules,
                                   const PickRule* dev_rules, int32_t* ids) {
  for (const PickRule& r : rules)
    check(!draws_ranked(r, n) || n < kMaxRankedRow, "pick_rows: a top-k or top-p draw from rows of ", n,
          " values (at most ", kMaxRankedRow - 1, ")");
  // The kernel's cluster width is its build's for this device's GPU (a
  // cluster on Hopper, one block on the PTX's older GPUs): read once a device.
  static std::atomic<int> widths[64];
  std::atomic<int>& width = widths[ctx_->device % 64];
  if (width.load(std::memory_order_relaxed) == 0) {
    cudaFuncAttributes a{};
    check_cuda(cudaFuncGetAttributes(&a, draw_ranked_kernel), "read the ranked draw kernel's cluster size");
    width.store(std::max(1, a.requiredClusterWidth), std::memory_order_relaxed);
  }
  const unsigned parts = unsigned(width.load(std::memory_order_relaxed));
  launch("pick_rows", draw_ranked_kernel, unsigned(rows * parts), kThreads, 0, x, n, dev_rules, ids);
}

}  // namespace fathom::cuda
