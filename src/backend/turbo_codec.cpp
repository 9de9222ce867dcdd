#include "backend/turbo_codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "backend/affine_codec.h"

namespace fathom {
namespace {

double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

LloydMaxCodebook derive(int bits) {
  const int n = 1 << bits;
  std::vector<double> c(static_cast<size_t>(n)), b(static_cast<size_t>(n + 1));
  for (int i = 0; i < n; ++i) c[i] = -2.0 + 4.0 * (i + 0.5) / n;  // any ascending start converges
  for (int iter = 0; iter < 2000; ++iter) {
    b[0] = -INFINITY;
    b[n] = INFINITY;
    for (int i = 1; i < n; ++i) b[i] = 0.5 * (c[i - 1] + c[i]);
    // Each centroid moves to the mean of the Gaussian over its cell.
    for (int i = 0; i < n; ++i) {
      const double mass = normal_cdf(b[i + 1]) - normal_cdf(b[i]);
      c[i] = (normal_pdf(b[i]) - normal_pdf(b[i + 1])) / mass;
    }
  }
  LloydMaxCodebook book;
  book.bits = bits;
  double captured = 0.0;  // Σ p_i c_i²; with centroid conditions, MSE = 1 − Σ p_i c_i²
  for (int i = 0; i < n; ++i) {
    book.centroids.push_back(float(c[i]));
    captured += (normal_cdf(b[i + 1]) - normal_cdf(b[i])) * c[i] * c[i];
  }
  for (int i = 1; i < n; ++i) book.boundaries.push_back(float(b[i]));
  book.mse = 1.0 - captured;
  return book;
}

void fwht(float* x, int64_t n) {
  for (int64_t len = 1; len < n; len <<= 1)
    for (int64_t i = 0; i < n; i += len << 1)
      for (int64_t j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
}

}  // namespace

uint32_t LloydMaxCodebook::encode(float x) const {
  return uint32_t(std::upper_bound(boundaries.begin(), boundaries.end(), x) - boundaries.begin());
}

const LloydMaxCodebook& lloyd_max_codebook(int bits) {
  check(bits >= 1 && bits <= 4, "TurboQuant: codebook bits must be 1..4, got ", bits);
  static std::array<LloydMaxCodebook, 5> books;
  static std::once_flag once;
  std::call_once(once, [] {
    for (int b = 1; b <= 4; ++b) books[b] = derive(b);
  });
  return books[bits];
}

HadamardRotation::HadamardRotation(int64_t dim, uint64_t seed) {
  check(dim > 0 && (dim & (dim - 1)) == 0, "TurboQuant: rotation dim must be a power of two, got ", dim);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < dim; ++i) signs_.push_back((rng() & 1) ? 1.0f : -1.0f);
}

void HadamardRotation::apply(float* x) const {
  const int64_t d = dim();
  for (int64_t i = 0; i < d; ++i) x[i] *= signs_[i];
  fwht(x, d);
  const float inv = 1.0f / std::sqrt(float(d));
  for (int64_t i = 0; i < d; ++i) x[i] *= inv;
}

void HadamardRotation::apply_inverse(float* x) const {
  const int64_t d = dim();
  fwht(x, d);
  const float inv = 1.0f / std::sqrt(float(d));
  for (int64_t i = 0; i < d; ++i) x[i] *= inv * signs_[i];
}

void turbo_quantize_row(const float* rotated, int64_t dim, const LloydMaxCodebook& book, uint32_t* codes,
                        float* norm) {
  double ss = 0.0;
  for (int64_t i = 0; i < dim; ++i) ss += double(rotated[i]) * rotated[i];
  *norm = float(std::sqrt(ss));
  std::memset(codes, 0, size_t(packed_code_words(dim, book.bits)) * 4);
  // Coordinates of a rotated unit vector are ≈ N(0, 1/d): scale to unit variance.
  const float to_unit = *norm > 0.0f ? std::sqrt(float(dim)) / *norm : 0.0f;
  for (int64_t i = 0; i < dim; ++i) pack_code(codes, book.bits, i, book.encode(rotated[i] * to_unit));
}

void turbo_dequantize_row(const uint32_t* codes, float norm, int64_t dim, const LloydMaxCodebook& book, float* out) {
  static const cpu::DequantTableRow dequant = cpu::best_dequant_table_row();
  float table[16];
  const float scale = norm / std::sqrt(float(dim));
  for (size_t c = 0; c < book.centroids.size(); ++c) table[c] = scale * book.centroids[c];
  dequant(codes, book.bits, table, dim, out);
}

}  // namespace fathom
