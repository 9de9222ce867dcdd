#pragma once
// Attention's two products straight over quantized (coded) K/V rows: scores
// q·kᵀ and the probability-weighted sum of values, computed from the packed
// codes in one pass. Widening each cached row to f32 first (the reader path)
// writes and re-reads 4 bytes per value; these kernels read the ½–1 byte
// codes once, which is what makes a 4- or 8-bit cache cheaper than bf16.
//
// Storage is that of backend/affine_codec.h and backend/turbo_codec.h: a row of d
// values is a little-endian stream of `bits`-wide codes in 32-bit words.
#include <cstdint>

#include "core/dtype.h"

namespace fathom::cpu {

// n consecutive coded rows of one kv head (K or V): row j's codes start at codes + j * words.
struct CodedRows {
  const uint32_t* codes = nullptr;
  int64_t words = 0;  // 32-bit words per row
  int bits = 0;
  // Affine: row j group g has scales[j * groups + g], biases[j * groups + g] (groups = d / group).
  const bf16_t* scales = nullptr;
  const bf16_t* biases = nullptr;
  int group = 0;
  // Codebook: value = row_scales[j] * table[code]; table holds 2^bits floats. Null for affine.
  // The table is shared by every row (TurboQuant's Lloyd–Max centroids), so
  // only one float per row is stored besides the codes.
  const float* row_scales = nullptr;
  const float* table = nullptr;
};

// scores[qi * ld + j] = Σ_i q[qi * d + i] · value(row j, i) for qi < nq, j < n.
// nq is the query heads of one kv group (times a few query rows), so each
// row's codes are unpacked once for all of them.
using CodedScores = void (*)(const float* q, int64_t nq, int64_t d, const CodedRows& k, int64_t n, float* scores,
                             int64_t ld);
// out[qi * d + i] += Σ_j p[qi * ld + j] · value(row j, i) for qi < nq (accumulates into out,
// so a cache walked block by block needs no partial buffer).
using CodedValues = void (*)(const float* p, int64_t ld, int64_t nq, const CodedRows& v, int64_t d, int64_t n,
                             float* out);

// Plain loops that widen one row at a time: the definition the fast versions are tested against.
void coded_scores_reference(const float* q, int64_t nq, int64_t d, const CodedRows& k, int64_t n, float* scores,
                            int64_t ld);
void coded_values_reference(const float* p, int64_t ld, int64_t nq, const CodedRows& v, int64_t d, int64_t n,
                            float* out);

// AVX-512 (F, BW, VL): codes widened 16 at a time in registers; no f32 row is stored.
void coded_scores_avx512(const float* q, int64_t nq, int64_t d, const CodedRows& k, int64_t n, float* scores,
                         int64_t ld);
void coded_values_avx512(const float* p, int64_t ld, int64_t nq, const CodedRows& v, int64_t d, int64_t n,
                         float* out);

struct CodedRowKernels {
  CodedScores scores;
  CodedValues values;
};
// The fastest pair this processor runs (detect_isa() == Isa::avx512 → the avx512 pair).
CodedRowKernels best_coded_row_kernels();

}  // namespace fathom::cpu
