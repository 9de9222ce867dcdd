#include "model/weights.h"

#include <algorithm>
#include <cstring>

#include "backend/affine_weights.h"
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
      case DType::i32:
      case DType::u32:
      case DType::affine: fail("convert: ", dtype_name(src.dtype()), " source is not supported");
    }
    if (dst == DType::f32) out.data<float>()[i] = v;
    else out.data<bf16_t>()[i] = f32_to_bf16(v);
  }
  return out;
}

namespace {

// "model.layers.0.mlp.down_proj.weight" → "model.layers.0.mlp.down_proj".
std::string module_of(const std::string& name) {
  const std::string suffix = ".weight";
  check(name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0,
        "model weights: ", name, " is not a module's .weight");
  return name.substr(0, name.size() - suffix.size());
}

std::string shape_of(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

WeightLoader::WeightLoader(const WeightStore& store, ComputeDType compute, Backend& backend,
                           const QuantizationConfig* quantization)
    : store_(store), compute_(compute), backend_(backend), quantization_(quantization) {
  if (!quantization_) return;
  for (const auto& [module, _] : quantization_->modules)
    check(store_.has(module + ".weight"), "config.json quantization: the entry \"", module,
          "\" names no module of the weights (no ", module, ".weight)");
}

bool WeightLoader::quantized(const std::string& name) const {
  const std::string suffix = ".weight";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  return store_.has(module_of(name) + ".scales");
}

Tensor WeightLoader::fetch_affine(const std::string& name, int64_t count, int64_t rows, int64_t cols) const {
  const std::string module = module_of(name);
  check(quantization_ != nullptr, "model weights: ", module, ".scales is present but config.json has no "
        "\"quantization\" block saying how ", name, " is quantized");
  const std::optional<QuantParams> params = quantization_->for_module(module);
  check(params.has_value(), "model weights: config.json quantization says ", module, " is not quantized, but ",
        module, ".scales is present");
  check(store_.has(module + ".biases"), "model weights: ", module, ".scales has no ", module,
        ".biases (affine quantization needs both)");
  const int bits = params->bits, group = params->group_size;
  check(cols % group == 0, "model weights: ", name, " has ", cols, " columns, not a multiple of its group size ",
        group);
  std::vector<int64_t> codes_shape{rows, cols * bits / 32}, params_shape{rows, cols / group};
  if (count > 1) {
    codes_shape.insert(codes_shape.begin(), count);
    params_shape.insert(params_shape.begin(), count);
  }
  const Tensor codes = store_.get(name), scales = store_.get(module + ".scales"), biases = store_.get(module + ".biases");
  check(codes.dtype() == DType::u32, "model weights: ", name, " is quantized (", module,
        ".scales exists) but stored as ", dtype_name(codes.dtype()), ", not U32 codes");
  check(codes.shape() == codes_shape, "model weights: ", name, " has shape ", codes.shape_string(), " but ",
        bits, "-bit codes of ", shape_of(count > 1 ? std::vector<int64_t>{count, rows, cols} : std::vector<int64_t>{rows, cols}),
        " (config.json quantization: bits ", bits, ", group_size ", group, ") pack into ", shape_of(codes_shape));
  for (const Tensor* p : {&scales, &biases})
    check(p->shape() == params_shape, "model weights: ", p == &scales ? module + ".scales" : module + ".biases",
          " has shape ", p->shape_string(), " but groups of ", group, " over ", cols, " columns make ",
          shape_of(params_shape));
  const int64_t all = count * rows;
  return Tensor::affine(codes.reshape({all, cols * bits / 32}), cols,
                        AffineQuant{bits, group, scales.reshape({all, cols / group}), biases.reshape({all, cols / group})},
                        name);
}

Tensor WeightLoader::dequantized(const std::string& name, int64_t rows, int64_t cols) const {
  converted_bytes_ += rows * cols * 4;
  return dequantize_affine(fetch_affine(name, 1, rows, cols));
}

Tensor WeightLoader::fetch(const std::string& name, const std::vector<int64_t>& shape) const {
  check(store_.has(name), "model weights: missing tensor ", name);
  Tensor t = store_.get(name);
  if (t.shape() != shape)
    fail("model weights: ", name, " has shape ", t.shape_string(), " but the config implies ", shape_of(shape));
  return t.reshape(shape);
}

Tensor WeightLoader::place(const Tensor& host) const {
  if (backend_.device() == Device::cpu) return host;
  device_bytes_ += int64_t(host.nbytes());
  if (host.dtype() == DType::affine)
    device_bytes_ += int64_t(host.affine_quant().scales.nbytes() + host.affine_quant().biases.nbytes());
  return backend_.upload(host);
}

Tensor WeightLoader::matmul_weight(const std::string& name, int64_t rows, int64_t cols) const {
  if (quantized(name)) return place(fetch_affine(name, 1, rows, cols));
  return place(to_matmul_dtype(fetch(name, {rows, cols})));
}

Tensor WeightLoader::matmul_weight_stack(const std::string& name, int64_t count, int64_t rows, int64_t cols) const {
  if (quantized(name)) return place(fetch_affine(name, count, rows, cols));
  return place(to_matmul_dtype(fetch(name, {count, rows, cols}).reshape({count * rows, cols})));
}

Tensor WeightLoader::to_matmul_dtype(Tensor t) const {
  const DType want = compute_ == ComputeDType::bf16 ? DType::bf16 : (t.dtype() == DType::bf16 ? DType::bf16 : DType::f32);
  if (t.dtype() == want) return t;
  converted_bytes_ += int64_t(t.numel() * dtype_size(want));
  return convert_tensor(t, want);
}

Tensor WeightLoader::host_f32_matrix(const std::string& name, int64_t rows, int64_t cols) const {
  if (quantized(name)) return dequantized(name, rows, cols);
  Tensor t = fetch(name, {rows, cols});
  if (t.dtype() == DType::f32) return t;
  converted_bytes_ += rows * cols * 4;
  return convert_tensor(t, DType::f32);
}

Tensor WeightLoader::f32_matrix(const std::string& name, int64_t rows, int64_t cols) const {
  return place(host_f32_matrix(name, rows, cols));
}

Tensor WeightLoader::f32_tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  if (quantized(name)) {
    const int64_t cols = shape.back();
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    return place(dequantized(name, rows, cols).reshape(shape));
  }
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
  for (int64_t i : order) check(i >= 0 && i < rows, "model weights: regrouping row ", i, " of ", rows);
  // Rows of a plain tensor's storage into fresh memory.
  auto rows_in_order = [&](const Tensor& src) {
    const size_t row_bytes = src.nbytes() / size_t(std::max<int64_t>(rows, 1));
    Tensor out = Tensor::empty(src.dtype() == DType::affine ? std::vector<int64_t>{rows, int64_t(row_bytes / 4)}
                                                             : src.shape(),
                               src.dtype() == DType::affine ? DType::u32 : src.dtype());
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(static_cast<char*>(out.raw()) + size_t(i) * row_bytes,
                  static_cast<const char*>(src.raw()) + size_t(order[size_t(i)]) * row_bytes, row_bytes);
    return out;
  };
  Tensor out;
  int64_t bytes = 0;
  if (t.dtype() == DType::affine) {
    // Codes, scales and biases all go row by row.
    const AffineQuant& q = t.affine_quant();
    AffineQuant regrouped{q.bits, q.group_size, rows_in_order(q.scales), rows_in_order(q.biases)};
    bytes = int64_t(regrouped.scales.nbytes() + regrouped.biases.nbytes());
    out = Tensor::affine(rows_in_order(t), t.dim(1), std::move(regrouped), "regrouped rows");
  } else {
    out = rows_in_order(t);
  }
  bytes += int64_t(out.nbytes());
  if (t.raw() == stored.raw()) converted_bytes_ += bytes;  // else the conversion was counted
  return out;
}

Tensor WeightLoader::matmul_weight_rows(const std::string& name, int64_t rows, int64_t cols,
                                        const std::vector<int64_t>& order) const {
  if (quantized(name)) {
    const Tensor stored = fetch_affine(name, 1, rows, cols);
    return place(regroup_rows(stored, stored, order));
  }
  const Tensor stored = fetch(name, {rows, cols});
  return place(regroup_rows(stored, to_matmul_dtype(stored), order));
}

Tensor WeightLoader::f32_matrix_rows(const std::string& name, int64_t rows, int64_t cols,
                                     const std::vector<int64_t>& order) const {
  const Tensor host = host_f32_matrix(name, rows, cols);
  return place(regroup_rows(quantized(name) ? Tensor() : fetch(name, {rows, cols}), host, order));
}

Tensor WeightLoader::ones(int64_t n) const {
  Tensor t = Tensor::empty({n}, DType::f32);
  std::fill_n(t.data<float>(), n, 1.0f);
  return place(t);
}

Tensor WeightLoader::table(const std::string& name, int64_t rows, int64_t cols) const {
  if (quantized(name)) return place(fetch_affine(name, 1, rows, cols));
  return place(fetch(name, {rows, cols}));
}

}  // namespace fathom
