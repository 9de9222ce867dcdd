#include "backend/affine_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/affine_codec.h"
#include "backend/cpu/kernels.h"
#include "core/error.h"

namespace fathom {
namespace {

float element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[i];
    case DType::bf16: return bf16_to_f32(t.data<bf16_t>()[i]);
    case DType::f16: return f16_to_f32(t.data<f16_t>()[i]);
    default: fail("quantize: ", dtype_name(t.dtype()), " weights cannot be quantized");
  }
}

void store_param(Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::f32: t.data<float>()[i] = v; break;
    case DType::bf16: t.data<bf16_t>()[i] = f32_to_bf16(v); break;
    default: t.data<f16_t>()[i] = f32_to_f16(v); break;
  }
}

}  // namespace

Tensor quantize_affine(const Tensor& w, int bits, int group_size, DType params) {
  check(w.rank() == 2, "quantize: expected a matrix, got ", w.shape_string());
  check(params == DType::f32 || params == DType::bf16 || params == DType::f16, "quantize: scales cannot be ",
        dtype_name(params));
  const int64_t rows = w.dim(0), cols = w.dim(1);
  check(group_size > 0 && cols % group_size == 0, "quantize: ", cols, " columns are not a multiple of the group size ",
        group_size);
  const int64_t words = cols * bits / 32, groups = cols / group_size;
  check(words * 32 == cols * bits, "quantize: ", cols, " columns of ", bits, "-bit codes do not fill whole words");
  Tensor codes = Tensor::empty({rows, words}, DType::u32);
  Tensor scales = Tensor::empty({rows, groups}, params), biases = Tensor::empty({rows, groups}, params);
  std::memset(codes.raw(), 0, codes.nbytes());
  const float levels = float((1 << bits) - 1);
  std::vector<float> v(static_cast<size_t>(group_size));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t i = 0; i < group_size; ++i) v[size_t(i)] = element(w, r * cols + g * group_size + i);
      const auto [lo_it, hi_it] = std::minmax_element(v.begin(), v.end());
      const float lo = *lo_it, hi = *hi_it;
      // The extreme of larger magnitude is the edge: it gets q = 0 and is
      // represented exactly; the scale's sign points the codes into range.
      const bool low_edge = std::abs(lo) > std::abs(hi);
      float scale = std::max((hi - lo) / levels, 1e-7f);
      if (!low_edge) scale = -scale;
      const float edge = low_edge ? lo : hi;
      const float q0 = std::rint(edge / scale);
      float bias = 0.0f;
      if (q0 != 0.0f) {
        scale = edge / q0;
        bias = edge;
      }
      uint32_t* row_codes = codes.data<uint32_t>() + r * words;
      for (int64_t i = 0; i < group_size; ++i) {
        const float q = std::clamp(std::rint((v[size_t(i)] - bias) / scale), 0.0f, levels);
        pack_code(row_codes, bits, g * group_size + i, uint32_t(q));
      }
      store_param(scales, r * groups + g, scale);
      store_param(biases, r * groups + g, bias);
    }
  return Tensor::affine(codes, cols, AffineQuant{bits, group_size, scales, biases}, "quantize");
}

Tensor dequantize_affine(const Tensor& w) {
  const AffineQuant& q = w.affine_quant();
  const int64_t rows = w.dim(0), cols = w.dim(1), words = cols * q.bits / 32, groups = cols / q.group_size;
  const size_t param_bytes = dtype_size(q.scales.dtype());
  Tensor out = Tensor::empty({rows, cols}, DType::f32);
  for (int64_t r = 0; r < rows; ++r)
    cpu::dequant_affine_row_reference(w.data<uint32_t>() + r * words,
                                      static_cast<const char*>(q.scales.raw()) + size_t(r * groups) * param_bytes,
                                      static_cast<const char*>(q.biases.raw()) + size_t(r * groups) * param_bytes,
                                      q.scales.dtype(), q.bits, q.group_size, cols, out.data<float>() + r * cols);
  return out;
}

}  // namespace fathom
