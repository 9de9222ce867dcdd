#pragma once
// The CPU implementation of Backend. Argument checks happened in Backend;
// here each op splits its work over the thread pool and calls a kernel. The
// ops are implemented in several files by kind: cpu_backend.cpp (matmul,
// norms, attention), cpu_quant_matmul.cpp (matmuls over quantized weights), cpu_memory.cpp (memory and KV rows), cpu_rows.cpp
// (elementwise, row movement, routing) and cpu_delta_rule.cpp (Gated DeltaNet).
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/turbo_codec.h"
#include "core/thread_pool.h"

namespace fathom::cpu {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  std::string name() const override { return std::string("cpu-") + isa_name(isa_) + (amx_ ? "-amx" : ""); }
  Device device() const override { return Device::cpu; }
  void release_pages(void* data, int64_t bytes) override;

 protected:
  void matmul_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool bf16_inputs) override;
  void matmul_shared_impl(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs) override;
  void rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& y) override;
  void rope_impl(Tensor& x, const Tensor& cos, const Tensor& sin) override;
  void silu_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void gelu_tanh_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void add_inplace_impl(Tensor& x, const Tensor& y) override;
  void embedding_impl(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out) override;
  void attention_impl(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p,
                      Tensor& out) override;
  void kv_write_impl(std::span<const KvSegment> segments, const Tensor& k, const Tensor& v) override;
  void kv_read_impl(const KvView& kv, int64_t row, Tensor& k, Tensor& v) override;

  Tensor empty_impl(std::vector<int64_t> shape, DType dtype) override;
  Tensor reserve_impl(std::vector<int64_t> shape, DType dtype) override;
  Tensor upload_impl(const Tensor& host) override { return host; }
  Tensor download_impl(const Tensor& t) override { return t; }
  void copy_impl(const Tensor& src, Tensor& dst) override;
  void fill_impl(Tensor& x, float value) override;

  void scale_impl(Tensor& x, float s) override;
  void soft_cap_impl(Tensor& x, float cap) override;
  void mul_columns_impl(Tensor& x, const Tensor& w) override;
  void sigmoid_mul_impl(Tensor& x, const Tensor& gate) override;
  void copy_columns_impl(const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col, int64_t width) override;
  void gather_rows_impl(const Tensor& src, const std::vector<int32_t>& rows, Tensor& dst) override;
  void scatter_add_rows_impl(const Tensor& src, const std::vector<int32_t>& rows, const std::vector<float>& weights,
                             Tensor& dst) override;
  void pick_rows_impl(const Tensor& x, std::span<const PickRule> rules, Tensor& ids) override;
  void route_top_k_impl(const Tensor& logits, int64_t k, bool renormalize, const Tensor* expert_scale, Tensor& ids,
                        Tensor& weights) override;

  void causal_conv1d_silu_impl(const Tensor& x, const Tensor& weight, Tensor& state, Tensor& out) override;
  void l2_norm_heads_impl(Tensor& x, int64_t first_col, int64_t heads, int64_t head_dim, float scale,
                          float eps) override;
  void delta_rule_gates_impl(Tensor& b, Tensor& a, const Tensor& neg_a, const Tensor& dt_bias) override;
  void gated_delta_rule_impl(const DeltaRuleShape& shape, const Tensor& qkv, const Tensor& g, const Tensor& beta,
                             int64_t chunk, Tensor& state, Tensor& out, Tensor* history, int64_t history_row) override;
  void gated_rms_norm_impl(Tensor& x, const Tensor& z, const Tensor& w, float eps) override;

 private:
  // Elementwise work below this many elements runs on the calling thread: at
  // decode, waking the pool costs more than the work.
  static constexpr int64_t kInlineElements = 32768;
  template <typename Fn>
  void small_parallel_for(int64_t n, int64_t align, Fn&& fn) {
    if (n < kInlineElements) fn(int64_t(0), n);
    else pool_.parallel_for(n, align, fn);
  }

  // Scratch that only grows, as counted tensors: the largest step's inputs
  // rounded to bf16 and each thread's attention tile (its scores grow with the
  // context) stay allocated between steps, and the memory contract bills them.
  // The old buffer goes first: the contents need not survive, and the peak
  // stays at the new size instead of old + new.
  static Tensor& grow(Tensor& t, int64_t n, DType dtype) {
    if (!t.defined() || t.numel() < n) {
      t = Tensor();
      t = Tensor::empty({n}, dtype);
    }
    return t;
  }
  // x rounded to bf16 once for a step's matmuls (kept between steps); with
  // `widened`, also the rounded values as f32 for the kernels that multiply f32.
  const bf16_t* round_inputs(const Tensor& x, const float** widened);
  // Matmuls of one x whose weights are affine-quantized (cpu_quant_matmul.cpp):
  // x is prepared once for all of them, then each runs on its own.
  void quant_matmul(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs);
  void quant_matmul_one(QuantMatmulArgs& a, const bf16_t* xb, bool bf16_inputs);
  // Attention of q [T, heads, head_dim] over one view (one sequence's rows of a step).
  void attend_view(const Tensor& q, const KvView& kv, const AttentionParams& p, Tensor& out);
  // Decode-like rows over plain caches: each row's keys in segments spread
  // over the pool, then combined (kernels.h, kDecodeSegmentKeys).
  void attend_decode_segments(const float* q, const KvView& kv, const AttentionParams& p, Tensor& out,
                              int64_t heads);
  // The rotation of a codebook view (built once per seed and head_dim).
  const HadamardRotation& rotation(const KvView& kv);

  ThreadPool& pool_;
  Isa isa_;
  bool amx_;  // prefill matmuls on AMX tiles
  Kernels kernels_;
  Tensor rounded_;
  Tensor rounded_bf16_;
  Tensor rotated_;  // codebook attention: the queries rotated into the cache's space
  Tensor decode_parts_, decode_lses_;  // decode segments' outputs and log-sum-exps
  std::vector<Tensor> scratch_;
  // Quantized matmuls: x reordered for the GEMV and summed per group; and
  // each thread's widened weight rows or packed codes.
  Tensor quant_planes_, quant_sums_;
  std::vector<Tensor> quant_panels_;
  std::map<std::pair<uint64_t, int64_t>, std::unique_ptr<HadamardRotation>> rotations_;
};

}  // namespace fathom::cpu
