// Reference attention products over coded rows: each row is widened to f32
// with the same unpacking as the codecs, then multiplied in plain loops.
#include <vector>

#include "backend/cpu/coded_rows.h"
#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

// Row j of rows, widened: out[i] = value(row j, i), i < d.
void widen_row(const CodedRows& rows, int64_t j, int64_t d, int32_t* codes, float* out) {
  unpack_codes_reference(rows.codes + j * rows.words, rows.bits, d, codes);
  if (rows.table) {
    for (int64_t i = 0; i < d; ++i) out[i] = rows.row_scales[j] * rows.table[codes[i]];
    return;
  }
  const int64_t groups = d / rows.group;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t g = j * groups + i / rows.group;
    out[i] = float(codes[i]) * bf16_to_f32(rows.scales[g]) + bf16_to_f32(rows.biases[g]);
  }
}

}  // namespace

void coded_scores_reference(const float* q, int64_t nq, int64_t d, const CodedRows& k, int64_t n, float* scores,
                            int64_t ld) {
  std::vector<int32_t> codes(static_cast<size_t>(d));
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t j = 0; j < n; ++j) {
    widen_row(k, j, d, codes.data(), row.data());
    for (int64_t qi = 0; qi < nq; ++qi) {
      float s = 0.0f;
      for (int64_t i = 0; i < d; ++i) s += q[qi * d + i] * row[i];
      scores[qi * ld + j] = s;
    }
  }
}

void coded_values_reference(const float* p, int64_t ld, int64_t nq, const CodedRows& v, int64_t d, int64_t n,
                            float* out) {
  std::vector<int32_t> codes(static_cast<size_t>(d));
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t j = 0; j < n; ++j) {
    widen_row(v, j, d, codes.data(), row.data());
    for (int64_t qi = 0; qi < nq; ++qi)
      for (int64_t i = 0; i < d; ++i) out[qi * d + i] += p[qi * ld + j] * row[i];
  }
}

CodedRowKernels best_coded_row_kernels() {
  if (detect_isa() == Isa::avx512) return {coded_scores_avx512, coded_values_avx512};
  return {coded_scores_reference, coded_values_reference};
}

}  // namespace fathom::cpu
