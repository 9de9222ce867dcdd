#pragma once
// Affine quantization of one K or V row, as MLX defines it: per group of G
// values along head_dim, scale = (max − min) / (2^bits − 1), bias = min,
// value ≈ scale·q + bias; q packed little-endian, value i at bit i·bits of the
// row's stream of 32-bit words (for 2, 4 and 8 bits exactly MLX's uint32 packing).
#include <cstdint>

#include "core/dtype.h"

namespace fathom {

// 32-bit words holding `count` codes of `bits` bits, packed without gaps
// (rounded up: 16 three-bit codes take 48 bits, so two words).
inline int64_t packed_code_words(int64_t count, int bits) { return (count * bits + 31) / 32; }

struct AffineLayout {
  int bits = 4;
  int group_size = 64;
  int64_t dim = 0;
  int64_t words() const { return packed_code_words(dim, bits); }  // per row
  int64_t groups() const { return dim / group_size; }
};

void affine_quantize_row(const float* x, const AffineLayout& layout, uint32_t* codes, bf16_t* scales,
                         bf16_t* biases);
void affine_dequantize_row(const uint32_t* codes, const bf16_t* scales, const bf16_t* biases,
                           const AffineLayout& layout, float* out);

// Packing shared by the codecs: element i's code goes to bits [i·bits, (i+1)·bits)
// of a little-endian stream of 32-bit words (cpu::unpack_codes_reference reads it back).
inline void pack_code(uint32_t* words, int bits, int64_t i, uint32_t code) {
  const int64_t bit = i * bits;
  const int64_t w = bit >> 5, shift = bit & 31;
  words[w] |= code << shift;
  if (shift + bits > 32) words[w + 1] |= code >> (32 - shift);
}

}  // namespace fathom
