#include "backend/affine_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"

namespace fathom {

void affine_quantize_row(const float* x, const AffineLayout& layout, uint32_t* codes, bf16_t* scales,
                         bf16_t* biases) {
  const uint32_t levels = (1u << layout.bits) - 1;
  std::memset(codes, 0, size_t(layout.words()) * 4);
  for (int64_t g = 0; g < layout.groups(); ++g) {
    const float* v = x + g * layout.group_size;
    const auto [lo, hi] = std::minmax_element(v, v + layout.group_size);
    const float scale = (*hi - *lo) / float(levels);
    scales[g] = f32_to_bf16(scale);
    biases[g] = f32_to_bf16(*lo);
    // Codes are chosen against the stored (bf16) scale and bias, so the
    // rounding error of the parameters is not added on top.
    const float s = bf16_to_f32(scales[g]), b = bf16_to_f32(biases[g]);
    for (int64_t i = 0; i < layout.group_size; ++i) {
      const float q = s > 0.0f ? std::nearbyint((v[i] - b) / s) : 0.0f;
      pack_code(codes, layout.bits, g * layout.group_size + i, uint32_t(std::clamp(q, 0.0f, float(levels))));
    }
  }
}

void affine_dequantize_row(const uint32_t* codes, const bf16_t* scales, const bf16_t* biases,
                           const AffineLayout& layout, float* out) {
  static const cpu::DequantAffineRow dequant = cpu::best_dequant_affine_row();
  dequant(codes, scales, biases, DType::bf16, layout.bits, layout.group_size, layout.dim, out);
}

}  // namespace fathom
