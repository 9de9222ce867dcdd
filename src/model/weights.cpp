#include "model/weights.h"

#include <algorithm>
#include <cstring>

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

Tensor WeightLoader::place(const Tensor& host) const {
  if (backend_.device() == Device::cpu) return host;
  device_bytes_ += int64_t(host.nbytes());
  return backend_.upload(host);
}

Tensor WeightLoader::matmul_weight(const std::string& name, int64_t rows, int64_t cols) const {
  return place(to_matmul_dtype(fetch(name, {rows, cols})));
}

Tensor WeightLoader::matmul_weight_stack(const std::string& name, int64_t count, int64_t rows, int64_t cols) const {
  return place(to_matmul_dtype(fetch(name, {count, rows, cols}).reshape({count * rows, cols})));
}

Tensor WeightLoader::to_matmul_dtype(Tensor t) const {
  const DType want = compute_ == ComputeDType::bf16 ? DType::bf16 : (t.dtype() == DType::bf16 ? DType::bf16 : DType::f32);
  if (t.dtype() == want) return t;
  converted_bytes_ += int64_t(t.numel() * dtype_size(want));
  return convert_tensor(t, want);
}

Tensor WeightLoader::host_f32_matrix(const std::string& name, int64_t rows, int64_t cols) const {
  Tensor t = fetch(name, {rows, cols});
  if (t.dtype() == DType::f32) return t;
  converted_bytes_ += rows * cols * 4;
  return convert_tensor(t, DType::f32);
}

Tensor WeightLoader::f32_matrix(const std::string& name, int64_t rows, int64_t cols) const {
  return place(host_f32_matrix(name, rows, cols));
}

Tensor WeightLoader::f32_tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  Tensor t = fetch(name, shape);
  if (t.dtype() == DType::f32) return place(t);
  converted_bytes_ += t.numel() * 4;
  return place(convert_tensor(t, DType::f32));
}

Tensor WeightLoader::vector(const std::string& name, int64_t n) const {
  Tensor t = fetch(name, {n});
  if (t.dtype() == DType::f32) return place(t);
  converted_bytes_ += n * 4;
  return place(convert_tensor(t, DType::f32));
}

Tensor WeightLoader::mapped_vector(const std::string& name, int64_t n, float (*map)(float)) const {
  Tensor out = convert_tensor(fetch(name, {n}), DType::f32);  // always a fresh copy
  for (int64_t i = 0; i < n; ++i) out.data<float>()[i] = map(out.data<float>()[i]);
  converted_bytes_ += n * 4;
  return place(out);
}

Tensor WeightLoader::one_plus_vector(const std::string& name, int64_t n) const {
  return mapped_vector(name, n, [](float w) { return 1.0f + w; });
}

float WeightLoader::scalar(const std::string& name) const {
  return convert_tensor(fetch(name, {1}), DType::f32).data<float>()[0];
}

Tensor WeightLoader::regroup_rows(const Tensor& stored, const Tensor& t, const std::vector<int64_t>& order) const {
  const int64_t rows = t.dim(0);
  check(int64_t(order.size()) == rows, "model weights: regrouping ", rows, " rows by an order of ", order.size());
  const size_t row_bytes = t.nbytes() / size_t(std::max<int64_t>(rows, 1));
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  for (int64_t i = 0; i < rows; ++i) {
    check(order[size_t(i)] >= 0 && order[size_t(i)] < rows, "model weights: regrouping row ", order[size_t(i)],
          " of ", rows);
    std::memcpy(static_cast<char*>(out.raw()) + size_t(i) * row_bytes,
                static_cast<const char*>(t.raw()) + size_t(order[size_t(i)]) * row_bytes, row_bytes);
  }
  if (t.raw() == stored.raw()) converted_bytes_ += int64_t(out.nbytes());  // else the conversion was counted
  return out;
}

Tensor WeightLoader::matmul_weight_rows(const std::string& name, int64_t rows, int64_t cols,
                                        const std::vector<int64_t>& order) const {
  const Tensor stored = fetch(name, {rows, cols});
  return place(regroup_rows(stored, to_matmul_dtype(stored), order));
}

Tensor WeightLoader::f32_matrix_rows(const std::string& name, int64_t rows, int64_t cols,
                                     const std::vector<int64_t>& order) const {
  const Tensor stored = fetch(name, {rows, cols});
  return place(regroup_rows(stored, host_f32_matrix(name, rows, cols), order));
}

Tensor WeightLoader::ones(int64_t n) const {
  Tensor t = Tensor::empty({n}, DType::f32);
  std::fill_n(t.data<float>(), n, 1.0f);
  return place(t);
}

Tensor WeightLoader::table(const std::string& name, int64_t rows, int64_t cols) const {
  return place(fetch(name, {rows, cols}));
}

}  // namespace fathom
