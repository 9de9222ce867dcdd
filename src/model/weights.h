#pragma once
// Fetches weights from a WeightStore in the form the kernels want, copying
// only when the stored dtype is not one the kernels read directly.
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "io/quantization_config.h"
#include "io/safetensors.h"

namespace fathom {

enum class ComputeDType { f32, bf16 };
const char* compute_dtype_name(ComputeDType d);
ComputeDType parse_compute_dtype(const std::string& s);  // "f32" | "bf16"

class WeightLoader {
 public:
  // Every tensor it returns is on `backend`'s device (the CPU keeps the
  // mapped file's memory as it is). `quantization` is config.json's block for
  // an MLX-format folder (null otherwise); its per-module entries must name
  // modules of the weights.
  WeightLoader(const WeightStore& store, ComputeDType compute, Backend& backend,
               const QuantizationConfig* quantization = nullptr);

  // MLX quantization: a matmul weight or embedding table NAME ("….weight")
  // whose module has a .scales tensor comes back affine (packed codes, scales
  // and biases as stored, never widened); every accessor that wants f32
  // (f32_matrix, f32_tensor) widens such a module itself.
  bool quantized(const std::string& name) const;

  // A matmul weight [rows, cols]: bf16 stays bf16 (exact when widened for f32
  // compute); f32 stays for f32 compute and becomes bf16 for bf16 compute; f16
  // becomes the compute dtype.
  Tensor matmul_weight(const std::string& name, int64_t rows, int64_t cols) const;
  // A stack of matmul weights [count, rows, cols] (fused MoE experts) as one
  // [count * rows, cols] tensor; slice_rows picks one matrix or part of it.
  Tensor matmul_weight_stack(const std::string& name, int64_t count, int64_t rows, int64_t cols) const;
  // A matmul weight [rows, cols] whose rows are regrouped: row i of the
  // result is stored row order[i] (a fused projection laid out the way the
  // model's ops read it). A private copy, counted as converted.
  Tensor matmul_weight_rows(const std::string& name, int64_t rows, int64_t cols,
                            const std::vector<int64_t>& order) const;
  // A small matrix kept in f32 whatever the compute dtype (MoE routers: a
  // bf16-rounded router flips expert choices between near-tied experts).
  Tensor f32_matrix(const std::string& name, int64_t rows, int64_t cols) const;
  // The same, rows regrouped as matmul_weight_rows does.
  Tensor f32_matrix_rows(const std::string& name, int64_t rows, int64_t cols, const std::vector<int64_t>& order) const;
  // Any stored tensor of this shape, widened to f32 (Gated DeltaNet's conv weights).
  Tensor f32_tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  // Norm weights and biases: always f32, [n].
  Tensor vector(const std::string& name, int64_t n) const;
  // An f32 vector whose values are map(w) of the stored w: Gemma and
  // Qwen3-Next store some RMSNorm weights as w and scale by (1 + w), Gated
  // DeltaNet keeps −exp(A_log). A private copy.
  Tensor mapped_vector(const std::string& name, int64_t n, float (*map)(float)) const;
  // 1 + w of a norm weight, in f32 (which the plain rms_norm op then applies).
  Tensor one_plus_vector(const std::string& name, int64_t n) const;
  // n ones (f32): the weight of an RMSNorm that has none of its own.
  Tensor ones(int64_t n) const;
  // A one-element tensor's value, read on the host.
  float scalar(const std::string& name) const;
  // An embedding table [rows, cols] as stored (the gather widens any dtype).
  Tensor table(const std::string& name, int64_t rows, int64_t cols) const;
  bool has(const std::string& name) const { return store_.has(name); }
  // Bytes of weights this loader had to materialize on the host (conversions).
  int64_t converted_bytes() const { return converted_bytes_; }
  // Bytes it placed on a device other than the CPU (every weight it returned).
  int64_t device_bytes() const { return device_bytes_; }
  Backend& backend() const { return backend_; }

 private:
  Tensor fetch(const std::string& name, const std::vector<int64_t>& shape) const;
  // The affine matrix [count · rows, cols] of a quantized module's stack of
  // `count` matrices [rows, cols], every shape checked against the config.
  Tensor fetch_affine(const std::string& name, int64_t count, int64_t rows, int64_t cols) const;
  // A quantized module widened to f32 [rows, cols] (a private copy, counted).
  Tensor dequantized(const std::string& name, int64_t rows, int64_t cols) const;
  Tensor to_matmul_dtype(Tensor t) const;
  Tensor host_f32_matrix(const std::string& name, int64_t rows, int64_t cols) const;
  // Rows of t in `order`, into fresh memory (counted unless t already is a conversion).
  Tensor regroup_rows(const Tensor& stored, const Tensor& t, const std::vector<int64_t>& order) const;
  // The host tensor on the backend's device.
  Tensor place(const Tensor& host) const;

  const WeightStore& store_;
  ComputeDType compute_;
  Backend& backend_;
  const QuantizationConfig* quantization_;
  mutable int64_t converted_bytes_ = 0;
  mutable int64_t device_bytes_ = 0;
};

// dst ← src converted elementwise (f32/bf16/f16 → f32/bf16).
Tensor convert_tensor(const Tensor& src, DType dst);


}  // namespace fathom
