// Causal (optionally windowed) attention over a KV view. Scores for one query
// row and head live in a per-thread buffer of kv.length floats; no
// [heads, T, N] tensor is ever built.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

// Queries per tile: enough to amortize widening each key row, few enough
// that their scores stay in L2.
constexpr int64_t kTileQueries = 16;
// Rows a reader widens at a time.
constexpr int64_t kReaderBlock = 64;

inline float load_kv(const float* p, int64_t i) { return p[i]; }
inline float load_kv(const bf16_t* p, int64_t i) { return bf16_to_f32(p[i]); }

struct KeyRange {
  int64_t lo, hi;  // inclusive rows of the view
};

// The rows query row t sees: positions up to its own and, with a window, the
// last `window` of them; row j of the view holds position first_position + j.
inline KeyRange visible_keys(const KvView& kv, const AttentionParams& p, int64_t t) {
  const int64_t pos = p.first_position + t;
  const int64_t lo = p.window ? std::max<int64_t>(kv.first_position, pos - *p.window + 1) : kv.first_position;
  return {lo - kv.first_position, pos - kv.first_position};
}

// All query heads of kv group g for rows [t0, t1) as two small GEMMs:
// scores = Q·Kᵀ over the visible key span, masked and softmaxed in place,
// then out = P·V. Scratch: the gathered, pre-scaled queries [nq, d], the
// scores [nq, span] and the tile's output [nq, d].
void attend_group_tile(const Kernels& kern, const float* q, int64_t heads, const KvView& kv,
                       const AttentionParams& p, int64_t g, int64_t t0, int64_t t1, float* scratch, float* out) {
  const int64_t group = heads / kv.kv_heads, d = kv.head_dim;
  const int64_t nq = (t1 - t0) * group;
  const int64_t lo_all = visible_keys(kv, p, t0).lo, hi_all = visible_keys(kv, p, t1 - 1).hi;
  const int64_t span = hi_all - lo_all + 1;
  float* queries = scratch;             // [nq, d]
  float* scores = queries + nq * d;     // [nq, span]
  float* result = scores + nq * span;   // [nq, d]
  const size_t elem = kv.reader ? 0 : dtype_size(kv.dtype);
  const char* k = static_cast<const char*>(kv.k) + size_t(g * kv.head_stride + lo_all * d) * elem;
  const char* v = static_cast<const char*>(kv.v) + size_t(g * kv.head_stride + lo_all * d) * elem;
  auto query_row = [&](int64_t qi) { return ((t0 + qi / group) * heads + g * group + qi % group) * d; };

  for (int64_t qi = 0; qi < nq; ++qi) {
    const float* src = q + query_row(qi);
    for (int64_t i = 0; i < d; ++i) queries[qi * d + i] = src[i] * p.scale;
  }
  // Keys come straight from the cache, or a block at a time from a reader.
  const int64_t block = kv.reader ? std::min(span, kReaderBlock) : span;
  float* rows = result + nq * d;          // [block, d] widened rows (reader only)
  float* partial = rows + block * d;      // [nq, max(block, d)] (reader only)
  for (int64_t j0 = 0; j0 < span; j0 += block) {
    const int64_t n = std::min(block, span - j0);
    MatmulArgs a;
    a.x = queries;
    a.M = nq, a.N = n, a.K = d;
    if (kv.reader) {
      kv.reader->read(kv.reader->ctx, false, g, lo_all + j0, n, rows);
      a.w = rows;
      a.w_dtype = DType::f32;
      a.y = partial;
    } else {
      a.w = k;
      a.w_dtype = kv.dtype;
      a.y = scores;
    }
    kern.matmul(a, 0, n);
    if (kv.reader)
      for (int64_t qi = 0; qi < nq; ++qi) std::copy(partial + qi * n, partial + (qi + 1) * n, scores + qi * span + j0);
  }

  for (int64_t qi = 0; qi < nq; ++qi) {
    const KeyRange r = visible_keys(kv, p, t0 + qi / group);
    kern.softmax_row(scores + qi * span, span, r.lo - lo_all, r.hi - lo_all);
  }
  if (!kv.reader) {
    kern.gemm_nn(scores, span, v, kv.dtype, d, nq, span, d, result, d);
  } else {
    std::fill(result, result + nq * d, 0.0f);
    for (int64_t j0 = 0; j0 < span; j0 += block) {
      const int64_t n = std::min(block, span - j0);
      kv.reader->read(kv.reader->ctx, true, g, lo_all + j0, n, rows);
      kern.gemm_nn(scores + j0, span, rows, DType::f32, d, nq, n, d, partial, d);
      for (int64_t i = 0; i < nq * d; ++i) result[i] += partial[i];
    }
  }
  for (int64_t qi = 0; qi < nq; ++qi) std::copy(result + qi * d, result + (qi + 1) * d, out + query_row(qi));
}

// The reference reads a reader's rows one at a time into plain f32 copies.
void reference_rows_reader(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p, int64_t t0,
                           int64_t t1, float* out) {
  std::vector<float> k(size_t(kv.kv_heads * kv.length * kv.head_dim)), v(k.size());
  for (int64_t h = 0; h < kv.kv_heads; ++h)
    for (int64_t j = 0; j < kv.length; ++j) {
      kv.reader->read(kv.reader->ctx, false, h, j, 1, k.data() + (h * kv.length + j) * kv.head_dim);
      kv.reader->read(kv.reader->ctx, true, h, j, 1, v.data() + (h * kv.length + j) * kv.head_dim);
    }
  KvView plain = kv;
  plain.reader = nullptr;
  plain.k = k.data();
  plain.v = v.data();
  plain.dtype = DType::f32;
  plain.head_stride = kv.length * kv.head_dim;
  attention_rows_reference(q, heads, plain, p, t0, t1, out);
}

template <typename T>
void reference_rows(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p, int64_t t0,
                    int64_t t1, float* out) {
  const int64_t group = heads / kv.kv_heads;
  const T* k = static_cast<const T*>(kv.k);
  const T* v = static_cast<const T*>(kv.v);
  std::vector<double> w;
  for (int64_t t = t0; t < t1; ++t) {
    const KeyRange r = visible_keys(kv, p, t);
    for (int64_t h = 0; h < heads; ++h) {
      const T* kh = k + (h / group) * kv.head_stride;
      const T* vh = v + (h / group) * kv.head_stride;
      const float* qr = q + (t * heads + h) * kv.head_dim;
      w.assign(size_t(r.hi - r.lo + 1), 0.0);
      double max_score = -INFINITY, sum = 0.0;
      for (int64_t j = r.lo; j <= r.hi; ++j) {
        double s = 0.0;
        for (int64_t d = 0; d < kv.head_dim; ++d) s += double(qr[d]) * load_kv(kh + j * kv.head_dim, d);
        w[j - r.lo] = s * p.scale;
        max_score = std::max(max_score, w[j - r.lo]);
      }
      for (auto& x : w) sum += (x = std::exp(x - max_score));
      for (int64_t d = 0; d < kv.head_dim; ++d) {
        double acc = 0.0;
        for (int64_t j = r.lo; j <= r.hi; ++j) acc += w[j - r.lo] * load_kv(vh + j * kv.head_dim, d);
        out[(t * heads + h) * kv.head_dim + d] = float(acc / sum);
      }
    }
  }
}

}  // namespace

int64_t attention_tile_rows(int64_t heads, int64_t kv_heads) {
  return std::max<int64_t>(1, kTileQueries / (heads / kv_heads));
}

int64_t attention_scratch_floats(const KvView& kv, int64_t heads, int64_t rows_in_chunk) {
  const int64_t nq = std::min(rows_in_chunk, attention_tile_rows(heads, kv.kv_heads)) * (heads / kv.kv_heads);
  const int64_t reader_extra = kv.reader ? kReaderBlock * kv.head_dim + nq * std::max(kReaderBlock, kv.head_dim) : 0;
  return 2 * nq * kv.head_dim + nq * kv.length + reader_extra;
}

void attention_tile(const Kernels& k, const float* q, int64_t heads, const KvView& kv, const AttentionParams& p,
                    int64_t g, int64_t t0, int64_t t1, float* scratch, float* out) {
  if (t1 - t0 == 1 && !kv.reader && k.attend_decode) {
    // Decode: one query row, its group's heads side by side in q and out.
    const int64_t group = heads / kv.kv_heads, d = kv.head_dim;
    const KeyRange r = visible_keys(kv, p, t0);
    const size_t first = size_t(g * kv.head_stride + r.lo * d) * dtype_size(kv.dtype);
    const int64_t at = (t0 * heads + g * group) * d;
    if (k.attend_decode(q + at, group, p.scale, static_cast<const char*>(kv.k) + first,
                        static_cast<const char*>(kv.v) + first, kv.dtype, d, r.hi - r.lo + 1, scratch, out + at))
      return;
  }
  attend_group_tile(k, q, heads, kv, p, g, t0, t1, scratch, out);
}

bool attend_decode_reference(const float* q, int64_t nq, float scale, const void* k, const void* v, DType dtype,
                             int64_t d, int64_t n, float* /*scratch*/, float* out) {
  KvView plain{nullptr, k, v, dtype, 1, d, n, n * d};
  AttentionParams p;
  p.scale = scale;
  p.first_position = n - 1;  // the query sees every row
  if (dtype == DType::bf16) reference_rows<bf16_t>(q, nq, plain, p, 0, 1, out);
  else reference_rows<float>(q, nq, plain, p, 0, 1, out);
  return true;
}

void attention_rows_reference(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p,
                              int64_t t0, int64_t t1, float* out) {
  if (kv.reader)
    reference_rows_reader(q, heads, kv, p, t0, t1, out);
  else if (kv.dtype == DType::bf16)
    reference_rows<bf16_t>(q, heads, kv, p, t0, t1, out);
  else
    reference_rows<float>(q, heads, kv, p, t0, t1, out);
}

}  // namespace fathom::cpu
