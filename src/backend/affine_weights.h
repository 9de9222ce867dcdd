#pragma once
// MLX's affine quantization of whole weight matrices (the format of MLX-
// community folders): per group of `group_size` values along a row, codes q of
// `bits` bits and a scale and bias in the model's float dtype, value =
// scale·q + bias; codes packed as the rows' little-endian bit streams
// (pack_code). Host-side: for the loader's f32 widenings, `fathom quantize`
// and tests. The matmul kernels read the packed form directly.
#include "core/tensor.h"

namespace fathom {

// w [rows, cols] (f32, bf16 or f16) quantized as mlx.core.quantize does: the
// group's extreme of larger magnitude is kept exactly (it becomes the bias, q
// = 0 there) and the scale is fitted to the range. Scales and biases are
// stored as `params` (f32, bf16 or f16) and codes chosen against the unrounded
// scale and bias, as MLX does.
Tensor quantize_affine(const Tensor& w, int bits, int group_size, DType params);

// An affine tensor widened to f32 [rows, cols]: fma(q, scale, bias) per value.
Tensor dequantize_affine(const Tensor& w);

}  // namespace fathom
