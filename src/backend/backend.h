#pragma once
// The device-agnostic op API. Public methods check shapes and dtypes and then
// dispatch to a device's implementation; model code only ever calls these.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/kv_view.h"
#include "core/tensor.h"

namespace fathom {

struct AttentionParams {
  float scale = 1.0f;
  // Query row i sits at position first_position + i; it sees cached positions
  // j <= its own (causal) and, with a window, only j > position - window.
  int64_t first_position = 0;
  std::optional<int64_t> window;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // y[M, N] = x[M, K] · w[N, K]ᵀ (+ bias[N]). x and y are f32; w is f32 or bf16.
  // bf16_inputs rounds x to bf16 first (bf16 compute: bf16 products, f32 sums).
  void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool bf16_inputs = false);
  // Several matmuls of the same x (q/k/v, gate/up) in one pass: x is rounded
  // once and all outputs are split across threads together.
  struct MatmulTarget {
    const Tensor* w;
    const Tensor* bias;  // or null
    Tensor* y;
  };
  void matmul_shared(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs = false);
  // y = x / rms(x) * w over the last dimension; x, y [rows, D] f32, w [D] f32.
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y);
  // Rotates the first 2·cos.dim(1) features of every head, halves style
  // (HF rotate_half): x [T, heads, head_dim]; cos, sin [T, rotary_dim / 2].
  void rope(Tensor& x, const Tensor& cos, const Tensor& sin);
  // out = silu(gate) * up, all [rows, D] f32.
  void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
  // out = gelu_tanh(gate) * up, all [rows, D] f32; gelu_tanh(x) =
  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (PyTorch's approximate="tanh").
  void gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out);
  // x += y, same shape, f32.
  void add_inplace(Tensor& x, const Tensor& y);
  // out[i] = table[ids[i]] widened to f32; table [vocab, D] f32/bf16/f16.
  void embedding(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out);
  // Causal attention of q [T, heads, head_dim] over a layer's blocks; out like q.
  void attention(const Tensor& q, const KvView& kv, const AttentionParams& p, Tensor& out);

 protected:
  virtual void matmul_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool bf16_inputs) = 0;
  virtual void matmul_shared_impl(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs) = 0;
  virtual void rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& y) = 0;
  virtual void rope_impl(Tensor& x, const Tensor& cos, const Tensor& sin) = 0;
  virtual void silu_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  virtual void gelu_tanh_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  virtual void add_inplace_impl(Tensor& x, const Tensor& y) = 0;
  virtual void embedding_impl(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out) = 0;
  virtual void attention_impl(const Tensor& q, const KvView& kv, const AttentionParams& p, Tensor& out) = 0;
};

// The CPU backend on the process-wide thread pool; picks AVX-512, AVX2 or
// portable kernels from what the processor supports.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace fathom
