#pragma once
// TurboQuant (MSE variant, no QJL residual): rotate each K or V vector with a
// randomized Hadamard transform, store its norm, and quantize every rotated,
// normalized coordinate with a Lloyd–Max codebook for the Gaussian it then
// follows (N(0, 1/d) ≈ the marginal of a uniform point on the sphere).
#include <cstdint>
#include <vector>

namespace fathom {

// Lloyd–Max quantizer for N(0, 1): 2^bits centroids (ascending) and the
// decision boundaries between them, derived by Lloyd's iteration.
struct LloydMaxCodebook {
  int bits = 0;
  std::vector<float> centroids;
  std::vector<float> boundaries;  // size 2^bits − 1
  double mse = 0.0;               // expected squared error for a unit Gaussian
  uint32_t encode(float x) const;
};
const LloydMaxCodebook& lloyd_max_codebook(int bits);  // bits in 1..4, computed once

// x → H·(s ⊙ x)/√d with random signs s fixed by the seed; orthogonal, so its
// inverse is its transpose. d must be a power of two.
class HadamardRotation {
 public:
  HadamardRotation(int64_t dim, uint64_t seed);
  void apply(float* x) const;
  void apply_inverse(float* x) const;
  int64_t dim() const { return int64_t(signs_.size()); }
  // The random signs (±1) applied before the transform: what a device kernel needs.
  const std::vector<float>& signs() const { return signs_; }

 private:
  std::vector<float> signs_;
};

// One already-rotated vector of `dim` values → packed codes + its norm.
void turbo_quantize_row(const float* rotated, int64_t dim, const LloydMaxCodebook& book, uint32_t* codes,
                        float* norm);
void turbo_dequantize_row(const uint32_t* codes, float norm, int64_t dim, const LloydMaxCodebook& book, float* out);

}  // namespace fathom
