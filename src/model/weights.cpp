#include "model/weights.h"

#include "core/error.h"

namespace fathom {

const char* compute_dtype_name(ComputeDType d) { return d == ComputeDType::f32 ? "f32" : "bf16"; }

ComputeDType parse_compute_dtype(const std::string& s) {
  if (s == "f32" || s == "float32") return ComputeDType::f32;
  if (s == "bf16" || s == "bfloat16") return ComputeDType::bf16;
  fail("--dtype: unsupported compute dtype \"", s, "\" (supported: f32, bf16)");
}

Tensor convert_tensor(const Tensor& src, DType dst) {
  check(dst == DType::f32 || dst == DType::bf16, "convert: target dtype ", dtype_name(dst), " is not supported");
  Tensor out = Tensor::empty(src.shape(), dst);
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) {
    float v = 0.0f;
    switch (src.dtype()) {
      case DType::f32: v = src.data<float>()[i]; break;
      case DType::bf16: v = bf16_to_f32(src.data<bf16_t>()[i]); break;
      case DType::f16: v = f16_to_f32(src.data<f16_t>()[i]); break;
      case DType::i32: fail("convert: i32 source is not supported");
    }
    if (dst == DType::f32) out.data<float>()[i] = v;
    else out.data<bf16_t>()[i] = f32_to_bf16(v);
  }
  return out;
}

Tensor WeightLoader::fetch(const std::string& name, const std::vector<int64_t>& shape) const {
  check(store_.has(name), "model weights: missing tensor ", name);
  Tensor t = store_.get(name);
  if (t.shape() != shape) {
    std::string want = "[";
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
    fail("model weights: ", name, " has shape ", t.shape_string(), " but the config implies ", want, "]");
  }
  return t.reshape(shape);
}

Tensor WeightLoader::matmul_weight(const std::string& name, int64_t rows, int64_t cols) const {
  return to_matmul_dtype(fetch(name, {rows, cols}));
}

Tensor WeightLoader::matmul_weight_stack(const std::string& name, int64_t count, int64_t rows, int64_t cols) const {
  return to_matmul_dtype(fetch(name, {count, rows, cols}).reshape({count * rows, cols}));
}

Tensor WeightLoader::to_matmul_dtype(Tensor t) const {
  const DType want = compute_ == ComputeDType::bf16 ? DType::bf16 : (t.dtype() == DType::bf16 ? DType::bf16 : DType::f32);
  if (t.dtype() == want) return t;
  converted_bytes_ += int64_t(t.numel() * dtype_size(want));
  return convert_tensor(t, want);
}

Tensor WeightLoader::f32_matrix(const std::string& name, int64_t rows, int64_t cols) const {
  Tensor t = fetch(name, {rows, cols});
  if (t.dtype() == DType::f32) return t;
  converted_bytes_ += rows * cols * 4;
  return convert_tensor(t, DType::f32);
}

Tensor WeightLoader::vector(const std::string& name, int64_t n) const {
  Tensor t = fetch(name, {n});
  if (t.dtype() == DType::f32) return t;
  converted_bytes_ += n * 4;
  return convert_tensor(t, DType::f32);
}

Tensor WeightLoader::table(const std::string& name, int64_t rows, int64_t cols) const {
  return fetch(name, {rows, cols});
}

}  // namespace fathom
