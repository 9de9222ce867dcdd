// Causal (optionally windowed) attention over a KV view. Scores for one query
// row and head live in a per-thread buffer of kv.length floats; no
// [heads, T, N] tensor is ever built.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

inline float load_kv(const float* p, int64_t i) { return p[i]; }
inline float load_kv(const bf16_t* p, int64_t i) { return bf16_to_f32(p[i]); }

struct KeyRange {
  int64_t lo, hi;  // inclusive
};

inline KeyRange visible_keys(const AttentionParams& p, int64_t t) {
  const int64_t pos = p.first_position + t;
  const int64_t lo = p.window ? std::max<int64_t>(0, pos - *p.window + 1) : 0;
  return {lo, pos};
}

template <typename T>
__attribute__((target_clones("avx512f", "avx2", "default")))
void attend_one(const float* q, const T* k, const T* v, int64_t head_dim, KeyRange r, float scale, float* scores,
                float* out) {
  float max_score = -INFINITY;
  for (int64_t j = r.lo; j <= r.hi; ++j) {
    const T* kj = k + j * head_dim;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < head_dim; ++d) s += q[d] * load_kv(kj, d);
    s *= scale;
    scores[j - r.lo] = s;
    max_score = std::max(max_score, s);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j <= r.hi - r.lo; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (int64_t j = r.lo; j <= r.hi; ++j) {
    const T* vj = v + j * head_dim;
    const float w = scores[j - r.lo];
#pragma omp simd
    for (int64_t d = 0; d < head_dim; ++d) out[d] += w * load_kv(vj, d);
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

template <typename T>
void attend_rows(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p, int64_t t0, int64_t t1,
                 int64_t h0, int64_t h1, float* scores, float* out) {
  const int64_t group = heads / kv.kv_heads;
  const T* k = static_cast<const T*>(kv.k);
  const T* v = static_cast<const T*>(kv.v);
  for (int64_t t = t0; t < t1; ++t) {
    const KeyRange r = visible_keys(p, t);
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / group;
      const int64_t row = (t * heads + h) * kv.head_dim;
      attend_one<T>(q + row, k + g * kv.head_stride, v + g * kv.head_stride, kv.head_dim, r, p.scale, scores,
                    out + row);
    }
  }
}

template <typename T>
void reference_rows(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p, int64_t t0,
                    int64_t t1, float* out) {
  const int64_t group = heads / kv.kv_heads;
  const T* k = static_cast<const T*>(kv.k);
  const T* v = static_cast<const T*>(kv.v);
  std::vector<double> w;
  for (int64_t t = t0; t < t1; ++t) {
    const KeyRange r = visible_keys(p, t);
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

void attention_rows(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p, int64_t t0,
                    int64_t t1, int64_t h0, int64_t h1, float* scores, float* out) {
  if (kv.dtype == DType::bf16)
    attend_rows<bf16_t>(q, heads, kv, p, t0, t1, h0, h1, scores, out);
  else
    attend_rows<float>(q, heads, kv, p, t0, t1, h0, h1, scores, out);
}

void attention_rows_reference(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p,
                              int64_t t0, int64_t t1, float* out) {
  if (kv.dtype == DType::bf16)
    reference_rows<bf16_t>(q, heads, kv, p, t0, t1, out);
  else
    reference_rows<float>(q, heads, kv, p, t0, t1, out);
}

}  // namespace fathom::cpu
