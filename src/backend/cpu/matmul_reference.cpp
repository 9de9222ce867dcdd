#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"

namespace fathom::cpu {

void matmul_slice_reference(const MatmulArgs& a, int64_t n0, int64_t n1) {
  for (int64_t m = 0; m < a.M; ++m) {
    const float* x = a.x + m * a.K;
    for (int64_t n = n0; n < n1; ++n) {
      double sum = 0.0;
      if (a.w_dtype == DType::bf16) {
        const bf16_t* w = static_cast<const bf16_t*>(a.w) + n * a.K;
        for (int64_t k = 0; k < a.K; ++k) sum += double(x[k]) * double(bf16_to_f32(w[k]));
      } else {
        const float* w = static_cast<const float*>(a.w) + n * a.K;
        for (int64_t k = 0; k < a.K; ++k) sum += double(x[k]) * double(w[k]);
      }
      a.y[m * a.N + n] = float(sum) + (a.bias ? a.bias[n] : 0.0f);
    }
  }
}

void gemm_nn_reference(const float* x, int64_t ldx, const void* w, DType w_dtype, int64_t ldw, int64_t M, int64_t K,
                       int64_t N, float* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const float wv = w_dtype == DType::bf16 ? bf16_to_f32(static_cast<const bf16_t*>(w)[k * ldw + n])
                                                : static_cast<const float*>(w)[k * ldw + n];
        sum += double(x[m * ldx + k]) * wv;
      }
      y[m * ldy + n] = float(sum);
    }
}

void unpack_codes_reference(const uint32_t* words, int bits, int64_t n, int32_t* out) {
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t bit = i * bits, w = bit >> 5, shift = bit & 31;
    uint64_t both = words[w];
    if (shift + bits > 32) both |= uint64_t(words[w + 1]) << 32;
    out[i] = int32_t((both >> shift) & mask);
  }
}

void dequant_affine_row_reference(const uint32_t* codes, const void* scales, const void* biases, DType params,
                                  int bits, int group, int64_t dim, float* out) {
  std::vector<int32_t> q(static_cast<size_t>(dim));
  unpack_codes_reference(codes, bits, dim, q.data());
  for (int64_t i = 0; i < dim; ++i)
    out[i] = std::fma(float(q[i]), param_at(scales, params, i / group), param_at(biases, params, i / group));
}

void quant_matmul_reference(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  const int64_t words = a.K * a.bits / 32, groups = a.K / a.group;
  const size_t param_bytes = dtype_size(a.params);
  std::vector<float> w(static_cast<size_t>(a.K));
  for (int64_t n = n0; n < n1; ++n) {
    dequant_affine_row_reference(a.codes + n * words, static_cast<const char*>(a.scales) + n * groups * param_bytes,
                                 static_cast<const char*>(a.biases) + n * groups * param_bytes, a.params, a.bits,
                                 a.group, a.K, w.data());
    for (int64_t m = 0; m < a.M; ++m) {
      double sum = 0.0;
      for (int64_t k = 0; k < a.K; ++k) sum += double(a.x[m * a.K + k]) * double(w[size_t(k)]);
      a.y[m * a.N + n] = float(sum) + (a.bias ? a.bias[n] : 0.0f);
    }
  }
}

void dequant_table_row_reference(const uint32_t* codes, int bits, const float* table, int64_t dim, float* out) {
  std::vector<int32_t> q(static_cast<size_t>(dim));
  unpack_codes_reference(codes, bits, dim, q.data());
  for (int64_t i = 0; i < dim; ++i) out[i] = table[q[i]];
}

void softmax_row_reference(float* x, int64_t n, int64_t first, int64_t last) {
  float max_score = -INFINITY;
  for (int64_t j = first; j <= last; ++j) max_score = std::max(max_score, x[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = j < first || j > last ? 0.0f : std::exp(x[j] - max_score);
    sum += x[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = first; j <= last; ++j) x[j] *= inv;
}

double log_sum_exp_reference(const float* x, int64_t n) {
  const float max_x = *std::max_element(x, x + n);
  if (std::isinf(max_x)) return max_x;
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += std::exp(double(x[i]) - double(max_x));
  return std::log(total) + max_x;
}

double exp_weights_reference(const float* x, float max, int64_t n, double* out) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += out[i] = std::exp(double(x[i] - max));
  return total;
}

void to_bf16_reference(const float* src, int64_t n, bf16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void gemm_pv_reference(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n, int64_t d,
                       float* y, int64_t ldy, bf16_t* /*panel*/) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < d; ++c) {
      double s = 0.0;
      for (int64_t j = 0; j < n; ++j) s += double(bf16_to_f32(p[m * ldp + j])) * double(bf16_to_f32(v[j * ldv + c]));
      y[m * ldy + c] += float(s);
    }
}

void gemm_qk_reference(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk, int64_t n,
                       float* s, int64_t lds) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t i = 0; i < d; ++i) sum += double(bf16_to_f32(q[r * ldq + i])) * double(bf16_to_f32(k[j * ldk + i]));
      s[r * lds + j] = float(sum);
    }
}

}  // namespace fathom::cpu
