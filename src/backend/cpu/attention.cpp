// Causal (optionally windowed) attention over a layer's KV blocks, read in
// place. Scores for one tile live in a per-thread buffer; no
// [heads, T, N] tensor is ever built.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/coded_rows.h"
#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

// Queries per tile: enough to amortize widening each key row, few enough
// that their scores stay in L2.
constexpr int64_t kTileQueries = 16;

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

// Calls fn(j, n, block, r) for each stretch of view rows [lo, hi] that lies
// in one block: rows j .. j + n - 1, from row r of `block`.
template <typename Fn>
void for_each_run(const KvView& kv, int64_t lo, int64_t hi, Fn&& fn) {
  for (int64_t j = lo; j <= hi;) {
    const int64_t r = kv.row_in_block(j);
    const int64_t n = std::min(kv.format.block_rows - r, hi - j + 1);
    fn(j, n, kv.block_of(j), r);
    j += n;
  }
}

// Plain rows of head g starting at row r of a block.
inline const std::byte* plain_rows(const KvView& kv, const std::byte* block, bool values, int64_t g, int64_t r) {
  return block + kv.format.rows_offset(values, g) + r * kv.format.row_bytes(values);
}

// Rows of head g from row r of a block, as the coded kernels read them.
CodedRows coded_rows(const KvView& kv, const std::byte* block, bool values, int64_t g, int64_t r) {
  const KvFormat& f = kv.format;
  CodedRows rows;
  rows.codes = reinterpret_cast<const uint32_t*>(plain_rows(kv, block, values, g, r));
  rows.words = f.code_words(values);
  rows.bits = values ? f.v_bits : f.k_bits;
  if (f.codec == KvFormat::Codec::affine) {
    rows.scales = reinterpret_cast<const bf16_t*>(block + f.scales_offset(values, g)) + r * f.groups();
    rows.biases = reinterpret_cast<const bf16_t*>(block + f.biases_offset(values, g)) + r * f.groups();
    rows.group = f.group_size;
  } else {
    rows.row_scales = reinterpret_cast<const float*>(block + f.scales_offset(values, g)) + r;
    rows.table = values ? kv.v_table.data() : kv.k_table.data();
  }
  return rows;
}

// bf16 compute over a plain bf16 cache, where the processor has the bf16
// kernels: the queries and the probabilities are rounded to bf16 and
// multiplied as bf16 (the scores through gemm_qk, P·V through gemm_pv).
bool bf16_tiles(const Kernels& kern, const KvView& kv, const AttentionParams& p) {
  return p.bf16_inputs && kern.gemm_pv && kern.gemm_qk && kv.format.codec == KvFormat::Codec::plain &&
         kv.format.dtype == DType::bf16 && kv.head_dim() % 32 == 0 && kv.head_dim() <= 512;
}

// All query heads of kv group g for rows [t0, t1), a block at a time:
// scores = Q·Kᵀ over the visible key span, masked and softmaxed in place,
// then out = P·V. Plain blocks go through small GEMMs; coded blocks through
// kernels that read the codes in place. Scratch: the gathered, pre-scaled
// queries [nq, d], the scores [nq, span], the tile's output [nq, d] and
// (plain blocks) a partial product [nq, max(block_rows, d)]; for bf16 tiles
// also the queries [nq, d] and probabilities [nq, span + 32] in bf16 and a
// block of values in pairs order.
void attend_group_tile(const Kernels& kern, const float* q, int64_t heads, const KvView& kv,
                       const AttentionParams& p, int64_t g, int64_t t0, int64_t t1, float* scratch, float* out) {
  static const CodedRowKernels coded = best_coded_row_kernels();
  const int64_t group = heads / kv.kv_heads(), d = kv.head_dim();
  const int64_t nq = (t1 - t0) * group;
  const int64_t lo_all = visible_keys(kv, p, t0).lo, hi_all = visible_keys(kv, p, t1 - 1).hi;
  const int64_t span = hi_all - lo_all + 1;
  const bool plain = kv.format.codec == KvFormat::Codec::plain;
  float* queries = scratch;            // [nq, d]
  float* scores = queries + nq * d;    // [nq, span]
  float* result = scores + nq * span;  // [nq, d]
  float* partial = result + nq * d;    // [nq, max(block_rows, d)]
  const bool as_bf16 = t1 - t0 > 1 && bf16_tiles(kern, kv, p);  // one row: decode-like, as decode computes it
  const int64_t ldp = span + 32;  // gemm_pv reads up to 31 past a run
  bf16_t* queries_b = reinterpret_cast<bf16_t*>(partial + nq * std::max(kv.format.block_rows, d));
  bf16_t* probs = queries_b + nq * d;  // [nq, ldp]
  bf16_t* panel = probs + nq * ldp;
  auto query_row = [&](int64_t qi) { return ((t0 + qi / group) * heads + g * group + qi % group) * d; };

  for (int64_t qi = 0; qi < nq; ++qi) {
    const float* src = q + query_row(qi);
    for (int64_t i = 0; i < d; ++i) queries[qi * d + i] = src[i] * p.scale;
  }
  if (as_bf16) kern.to_bf16(queries, nq * d, queries_b);
  for_each_run(kv, lo_all, hi_all, [&](int64_t j, int64_t n, const std::byte* block, int64_t r) {
    if (!plain) return coded.scores(queries, nq, d, coded_rows(kv, block, false, g, r), n, scores + (j - lo_all), span);
    if (as_bf16) {
      const auto* keys = reinterpret_cast<const bf16_t*>(plain_rows(kv, block, false, g, r));
      for (int64_t q0 = 0; q0 < nq; q0 += 16)
        kern.gemm_qk(queries_b + q0 * d, d, std::min<int64_t>(16, nq - q0), d, keys, d, n,
                     scores + q0 * span + (j - lo_all), span);
      return;
    }
    MatmulArgs a;
    a.x = queries;
    a.M = nq, a.N = n, a.K = d;
    a.w = plain_rows(kv, block, false, g, r);
    a.w_dtype = kv.format.dtype;
    a.y = partial;
    kern.matmul(a, 0, n);
    for (int64_t qi = 0; qi < nq; ++qi)
      std::copy(partial + qi * n, partial + (qi + 1) * n, scores + qi * span + (j - lo_all));
  });
  for (int64_t qi = 0; qi < nq; ++qi) {
    const KeyRange r = visible_keys(kv, p, t0 + qi / group);
    kern.softmax_row(scores + qi * span, span, r.lo - lo_all, r.hi - lo_all);
  }
  std::fill(result, result + nq * d, 0.0f);
  if (as_bf16) {
    for (int64_t qi = 0; qi < nq; ++qi) {
      kern.to_bf16(scores + qi * span, span, probs + qi * ldp);
      std::fill(probs + qi * ldp + span, probs + (qi + 1) * ldp, bf16_t(0));
    }
    for_each_run(kv, lo_all, hi_all, [&](int64_t j, int64_t n, const std::byte* block, int64_t r) {
      kern.gemm_pv(probs + (j - lo_all), ldp, reinterpret_cast<const bf16_t*>(plain_rows(kv, block, true, g, r)), d,
                   nq, n, d, result, d, panel);
    });
  }
  if (!as_bf16) for_each_run(kv, lo_all, hi_all, [&](int64_t j, int64_t n, const std::byte* block, int64_t r) {
    if (!plain) return coded.values(scores + (j - lo_all), span, nq, coded_rows(kv, block, true, g, r), d, n, result);
    kern.gemm_nn(scores + (j - lo_all), span, plain_rows(kv, block, true, g, r), kv.format.dtype, d, nq, n, d,
                 partial, d);
    for (int64_t i = 0; i < nq * d; ++i) result[i] += partial[i];
  });
  for (int64_t qi = 0; qi < nq; ++qi) std::copy(result + qi * d, result + (qi + 1) * d, out + query_row(qi));
}

// Decode over plain blocks: query row t of kv group g against view rows
// [lo, hi], in their runs, straight from the cache; out [group, d], lse as
// attend_decode's.
bool attend_decode_keys(const Kernels& kern, const float* q, int64_t heads, const KvView& kv,
                        const AttentionParams& p, int64_t g, int64_t t, int64_t lo, int64_t hi, float* scratch,
                        float* out, float* lse) {
  thread_local std::vector<KvRun> runs;
  runs.clear();
  for_each_run(kv, lo, hi, [&](int64_t, int64_t n, const std::byte* block, int64_t row) {
    runs.push_back({plain_rows(kv, block, false, g, row), plain_rows(kv, block, true, g, row), n});
  });
  const int64_t group = heads / kv.kv_heads(), d = kv.head_dim();
  return kern.attend_decode(q + (t * heads + g * group) * d, group, p.scale, runs.data(), int64_t(runs.size()),
                            kv.format.dtype, d, hi - lo + 1, scratch, out, lse);
}

// A lone query row of a prefill tile: all its visible rows at once.
bool attend_decode_tile(const Kernels& kern, const float* q, int64_t heads, const KvView& kv,
                        const AttentionParams& p, int64_t g, int64_t t, float* scratch, float* out) {
  const KeyRange r = visible_keys(kv, p, t);
  const int64_t at = (t * heads + g * (heads / kv.kv_heads())) * kv.head_dim();
  return attend_decode_keys(kern, q, heads, kv, p, g, t, r.lo, r.hi, scratch, out + at, nullptr);
}

}  // namespace

void read_kv_row(const KvView& kv, bool values, int64_t head, int64_t j, float* out) {
  const KvFormat& f = kv.format;
  const std::byte* block = kv.block_of(j);
  const int64_t r = kv.row_in_block(j), d = f.head_dim;
  const std::byte* src = plain_rows(kv, block, values, head, r);
  if (f.codec == KvFormat::Codec::plain) {
    for (int64_t i = 0; i < d; ++i)
      out[i] = f.dtype == DType::f32 ? reinterpret_cast<const float*>(src)[i]
                                     : bf16_to_f32(reinterpret_cast<const bf16_t*>(src)[i]);
    return;
  }
  const CodedRows rows = coded_rows(kv, block, values, head, r);
  if (f.codec == KvFormat::Codec::affine)
    return dequant_affine_row_reference(rows.codes, rows.scales, rows.biases, DType::bf16, rows.bits, rows.group, d,
                                        out);
  float table[16];
  for (int c = 0; c < (1 << rows.bits); ++c) table[c] = rows.row_scales[0] * rows.table[c];
  dequant_table_row_reference(rows.codes, rows.bits, table, d, out);
}

bool decode_segments_apply(const Kernels& k, const KvView& kv) {
  return k.attend_decode && kv.format.codec == KvFormat::Codec::plain && kv.head_dim() % 32 == 0 &&
         (kv.format.dtype == DType::bf16 || kv.format.dtype == DType::f32);
}

int64_t visible_span(const KvView& kv, const AttentionParams& p, int64_t t) {
  const KeyRange r = visible_keys(kv, p, t);
  return r.hi - r.lo + 1;
}

int64_t decode_segments(int64_t span) {
  return std::clamp<int64_t>(span / kDecodeSegmentKeys, 1, kDecodeMaxSegments);
}

void attention_decode_segment(const Kernels& k, const float* q, int64_t heads, const KvView& kv,
                              const AttentionParams& p, int64_t g, int64_t t, int64_t s, float* scratch, float* out,
                              float* lse) {
  const KeyRange r = visible_keys(kv, p, t);
  const int64_t span = r.hi - r.lo + 1, segments = decode_segments(span);
  const int64_t lo = r.lo + span * s / segments, hi = r.lo + span * (s + 1) / segments - 1;
  attend_decode_keys(k, q, heads, kv, p, g, t, lo, hi, scratch, out, lse);
}

void combine_decode_segments(const float* parts, const float* lses, int64_t segments, int64_t nq, int64_t d,
                             float* out) {
  for (int64_t qi = 0; qi < nq; ++qi) {
    float top = -INFINITY;
    for (int64_t s = 0; s < segments; ++s) top = std::max(top, lses[s * nq + qi]);
    float weight[kDecodeMaxSegments], total = 0.0f;
    for (int64_t s = 0; s < segments; ++s) total += weight[s] = std::exp(lses[s * nq + qi] - top);
    float* o = out + qi * d;
    std::fill(o, o + d, 0.0f);
    for (int64_t s = 0; s < segments; ++s) {
      const float w = weight[s] / total;
      const float* part = parts + (s * nq + qi) * d;
      for (int64_t i = 0; i < d; ++i) o[i] += w * part[i];
    }
  }
}

int64_t attention_tile_rows(int64_t heads, int64_t kv_heads) {
  return std::max<int64_t>(1, kTileQueries / (heads / kv_heads));
}

int64_t attention_scratch_floats(const Kernels& kern, const KvView& kv, const AttentionParams& p, int64_t heads,
                                 int64_t rows_in_chunk) {
  const int64_t nq = std::min(rows_in_chunk, attention_tile_rows(heads, kv.kv_heads())) * (heads / kv.kv_heads());
  const int64_t d = kv.head_dim(), b = kv.format.block_rows;
  const int64_t partial = kv.format.codec == KvFormat::Codec::plain ? nq * std::max(b, d) : 0;
  const bool bf16 = bf16_tiles(kern, kv, p) && rows_in_chunk > kDecodeLikeRows;
  const int64_t bf16_part = bf16 ? attention_bf16_tile_elements(nq, d, kv.length, b) : 0;
  return 2 * nq * d + nq * kv.length + partial + (bf16_part + 1) / 2;
}

void attention_tile(const Kernels& k, const float* q, int64_t heads, const KvView& kv, const AttentionParams& p,
                    int64_t g, int64_t t0, int64_t t1, float* scratch, float* out) {
  if (t1 - t0 == 1 && kv.format.codec == KvFormat::Codec::plain && k.attend_decode &&
      attend_decode_tile(k, q, heads, kv, p, g, t0, scratch, out))
    return;
  attend_group_tile(k, q, heads, kv, p, g, t0, t1, scratch, out);
}

bool attend_decode_reference(const float* q, int64_t nq, float scale, const KvRun* runs, int64_t count, DType dtype,
                             int64_t d, int64_t n, float* /*scratch*/, float* out, float* lse) {
  // The runs as one f32 head of n rows, then the plain reference.
  std::vector<double> k(static_cast<size_t>(n * d)), v(k.size());
  int64_t at = 0;
  for (int64_t c = 0; c < count; ++c)
    for (int64_t i = 0; i < runs[c].n * d; ++i, ++at) {
      k[size_t(at)] = dtype == DType::f32 ? static_cast<const float*>(runs[c].k)[i]
                                          : bf16_to_f32(static_cast<const bf16_t*>(runs[c].k)[i]);
      v[size_t(at)] = dtype == DType::f32 ? static_cast<const float*>(runs[c].v)[i]
                                          : bf16_to_f32(static_cast<const bf16_t*>(runs[c].v)[i]);
    }
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t qi = 0; qi < nq; ++qi) {
    double max_score = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t i = 0; i < d; ++i) s += double(q[qi * d + i]) * k[size_t(j * d + i)];
      w[size_t(j)] = s * scale;
      max_score = std::max(max_score, w[size_t(j)]);
    }
    for (auto& x : w) sum += (x = std::exp(x - max_score));
    if (lse) lse[qi] = float(max_score + std::log(sum));
    for (int64_t i = 0; i < d; ++i) {
      double acc = 0.0;
      for (int64_t j = 0; j < n; ++j) acc += w[size_t(j)] * v[size_t(j * d + i)];
      out[qi * d + i] = float(acc / sum);
    }
  }
  return true;
}

void attention_rows_reference(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p,
                              int64_t t0, int64_t t1, float* out) {
  const int64_t group = heads / kv.kv_heads(), d = kv.head_dim();
  std::vector<float> k(static_cast<size_t>(d)), v(static_cast<size_t>(d));
  std::vector<double> w, acc(static_cast<size_t>(d));
  for (int64_t t = t0; t < t1; ++t) {
    const KeyRange r = visible_keys(kv, p, t);
    for (int64_t h = 0; h < heads; ++h) {
      const float* qr = q + (t * heads + h) * d;
      w.assign(size_t(r.hi - r.lo + 1), 0.0);
      double max_score = -INFINITY, sum = 0.0;
      for (int64_t j = r.lo; j <= r.hi; ++j) {
        read_kv_row(kv, false, h / group, j, k.data());
        double s = 0.0;
        for (int64_t i = 0; i < d; ++i) s += double(qr[i]) * k[size_t(i)];
        w[size_t(j - r.lo)] = s * p.scale;
        max_score = std::max(max_score, w[size_t(j - r.lo)]);
      }
      for (auto& x : w) sum += (x = std::exp(x - max_score));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = r.lo; j <= r.hi; ++j) {
        read_kv_row(kv, true, h / group, j, v.data());
        for (int64_t i = 0; i < d; ++i) acc[size_t(i)] += w[size_t(j - r.lo)] * v[size_t(i)];
      }
      for (int64_t i = 0; i < d; ++i) out[(t * heads + h) * d + i] = float(acc[size_t(i)] / sum);
    }
  }
}

}  // namespace fathom::cpu
