#pragma once
// Element types and the scalar conversions every kernel shares.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace fathom {

// u32: raw 32-bit words (packed codes as a file stores them). affine: a matrix
// of MLX affine-quantized codes, `bits` wide each, with its scales and biases
// attached (Tensor::affine_quant); its elements have no whole-byte size, so
// dtype_size is 0 and Tensor::nbytes counts bits.
enum class DType : uint8_t { f32, bf16, f16, i32, u32, affine };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::u32: return 4;
    case DType::affine: return 0;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
    case DType::affine: return "affine";
  }
  return "?";
}

using bf16_t = uint16_t;  // raw bits of a bfloat16
using f16_t = uint16_t;   // raw bits of an IEEE half

inline float bf16_to_f32(bf16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline bf16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return bf16_t(bits >> 16);
}

inline float f16_to_f32(f16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The nearest f16 (ties to even); beyond its range, infinity; NaN stays NaN.
inline f16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // 65520 and up round to infinity
  if (abs < 0x38800000u) {
    // Below 2^-14: a subnormal f16, a whole number of 2^-24 steps. The
    // product is exact and nearbyint rounds ties to even.
    float v;
    std::memcpy(&v, &abs, 4);
    return uint16_t(sign | uint16_t(std::nearbyint(v * 16777216.0f)));
  }
  // Rebias the exponent and round the mantissa from 23 to 10 bits (a carry
  // into the exponent is the right result).
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u) - (uint32_t(127 - 15) << 23);
  return uint16_t(sign | uint16_t(rounded >> 13));
}

}  // namespace fathom
