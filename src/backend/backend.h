#pragma once
// The device-agnostic op API. Public methods check shapes and dtypes and then
// dispatch to a device's implementation; model code only ever calls these, so
// the same model file runs wherever a backend implements them. Tensors an op
// takes live on the backend's device; host data (token ids, the rows an op
// gathers) comes as std::vector and the backend moves it where it needs it.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/kv_view.h"
#include "backend/op_profile.h"
#include "backend/pick_rule.h"
#include "core/tensor.h"

namespace fathom {

// One sequence's part of a step: the step's rows [row, row + rows) are that
// sequence's positions [first_position, first_position + rows), and its
// layer's rows are `kv` (the rows of this step included, once written).
struct KvSegment {
  KvView kv;
  int64_t row = 0, rows = 0;
  int64_t first_position = 0;
};

struct AttentionParams {
  float scale = 1.0f;
  // Query row i sits at position first_position + i; it sees cached positions
  // j <= its own (causal) and, with a window, only j > position - window.
  // (The attention of a whole step takes each sequence's from its KvSegment.)
  int64_t first_position = 0;
  std::optional<int64_t> window;
  // bf16 compute: the scores' and the output's multiplications may round the
  // queries and the probabilities to bf16, as every matmul rounds its input
  // (the CPU does where its cache is bf16 and its kernels multiply bf16).
  bool bf16_inputs = false;
};

// The activation of a gated MLP: y = down(act(gate·x) · (up·x)).
enum class GateActivation { silu, gelu_tanh };

// One MoE layer's experts: expert e is gate[e] and up[e] [intermediate,
// hidden] and down[e] [hidden, intermediate] (no biases), with one activation.
// `device` is what Backend::bind_experts made of them for its device (null
// where it made nothing: the routing then goes through the host).
struct ExpertBank {
  std::vector<Tensor> gate, up, down;
  GateActivation act = GateActivation::silu;
  std::shared_ptr<const void> device;
  int64_t count() const { return int64_t(gate.size()); }
};

// The sizes of a Gated DeltaNet layer's delta rule (value head h reads key head
// h / (value_heads / key_heads)).
struct DeltaRuleShape {
  int64_t key_heads = 0, value_heads = 0, key_head_dim = 0, value_head_dim = 0;
  int64_t key_dim() const { return key_heads * key_head_dim; }
  int64_t value_dim() const { return value_heads * value_head_dim; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // Runs one model step's ops (`step` calls them and returns its result). A
  // device may record them and run them as one unit — the CUDA backend replays
  // a graph — so `step` must not read back device data before it returns:
  // what it downloads is filled in by the time run_step returns.
  virtual void run_step(const std::function<void()>& step) { step(); }
  // How run_step has run steps so far: replayed, captured anew (a new shape),
  // and kernel nodes updated for a replay. All zero where steps run as called.
  struct StepReplays {
    int64_t replays = 0, captures = 0, updated_nodes = 0;
    // Of the replayed steps: the host's time from the step's start to the
    // launch of its first graph (the GPU waits for it) and of its last
    // (recording the ops, updating nodes), and the GPU's time running them.
    double lead_seconds = 0.0, host_seconds = 0.0, gpu_seconds = 0.0;
  };
  virtual StepReplays step_replays() const { return {}; }
  // What each kernel costs inside the last replayed step's graph: the graph
  // replayed whole, then with that kernel's nodes switched off (a diagnostic:
  // the step's results are recomputed whole afterwards). Empty where steps
  // are not graphs.
  struct StepKernelCost {
    std::string kernel;
    int64_t nodes = 0;
    double ms_saved = 0.0;  // the whole graph's time less its time without these nodes
  };
  struct StepGraphCosts {
    double whole_ms = 0.0;
    std::vector<StepKernelCost> kernels;
  };
  virtual StepGraphCosts step_graph_costs() { return {}; }
  // Each op's wall time is added to `profile` while one is attached (null: off).
  void set_op_profile(OpProfile* profile) { profile_ = profile; }

  // --- Memory ---
  // Fresh, uninitialized storage on the device, counted per device.
  Tensor empty(std::vector<int64_t> shape, DType dtype);
  // Address space that commits as it is first written (KV slabs); see Tensor::reserve.
  Tensor reserve(std::vector<int64_t> shape, DType dtype);
  // Hands the pages of [data, data + bytes) back (a freed KV block); the
  // contents become unspecified.
  virtual void release_pages(void* data, int64_t bytes) = 0;
  // The host tensor's contents on the device (the CPU shares it as it is).
  Tensor upload(const Tensor& host);
  // The tensor's contents on the host (the CPU shares it as it is).
  Tensor download(const Tensor& t);
  // dst ← src: same dtype and element count, both on the device.
  void copy(const Tensor& src, Tensor& dst);
  // x[i] = value, f32.
  void fill(Tensor& x, float value);

  // y[M, N] = x[M, K] · w[N, K]ᵀ (+ bias[N]). x and y are f32; w is f32, bf16
  // or affine (MLX codes: each value scale·q + bias in f32, never rounded).
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
  // Two ops a decoder layer runs back to back, as one op so that a device can
  // fuse them (one pass over the rows, one launch); the results are those of
  // the two ops in turn. add_rms_norm: x += y, then out = rms_norm(x, w) (a
  // residual add and the next sublayer's norm); out may be y.
  void add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out);
  // rms_norm_rope: each head's vector of x [T, heads, head_dim] normed with w
  // [head_dim] in place, then rope (Qwen3's and Gemma's q/k norms).
  void rms_norm_rope(Tensor& x, const Tensor& w, float eps, const Tensor& cos, const Tensor& sin);
  // out = silu(gate) * up, all [rows, D] f32.
  void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
  // out = gelu_tanh(gate) * up, all [rows, D] f32; gelu_tanh(x) =
  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (PyTorch's approximate="tanh").
  void gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out);
  // x += y, same shape, f32.
  void add_inplace(Tensor& x, const Tensor& y);
  // out[i] = table[ids[i]] widened to f32; table [vocab, D] f32/bf16/f16 or affine.
  void embedding(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out);
  // Causal attention of q [T, heads, head_dim] over a layer's blocks; out like
  // q. A codebook view's rows are rotated: q is rotated into that space and
  // the output rotated back (the view carries the rotation's seed).
  void attention(const Tensor& q, const KvView& kv, const AttentionParams& p, Tensor& out);
  // The same for every sequence of a step at once (a device runs them as one
  // launch): each segment's rows of q [T, heads, head_dim] attend over its
  // view from its first position into the same rows of out.
  void attention(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p, Tensor& out);
  // Encodes k, v [count, kv_heads, head_dim] (f32) into rows [row, row + count)
  // of the view, which must lie in blocks the view's table already holds.
  void kv_write(const KvView& kv, int64_t row, const Tensor& k, const Tensor& v);
  // The same for every sequence of a step: each segment's rows of k, v [T,
  // kv_heads, head_dim] go to its view at its positions.
  void kv_write(std::span<const KvSegment> segments, const Tensor& k, const Tensor& v);
  // A step's queries and keys turned and its keys and values stored, as one
  // op (one launch on a device where the rows are plain): rope on q [T,
  // heads, head_dim] and on k [T, kv_heads, head_dim] (rms_norm_rope where
  // norms are given), then kv_write(segments, k, v). q and k are left turned.
  struct QkNorms {
    const Tensor* q = nullptr;  // [head_dim] each, or both null
    const Tensor* k = nullptr;
    float eps = 0.0f;
  };
  void rope_kv_write(std::span<const KvSegment> segments, Tensor& q, Tensor& k, const Tensor& v, const QkNorms& norms,
                     const Tensor& cos, const Tensor& sin);
  // Rows [row, row + count) of the view widened to f32 k, v [count, kv_heads, head_dim].
  void kv_read(const KvView& kv, int64_t row, Tensor& k, Tensor& v);

  // --- Elementwise and row movement (all f32) ---
  // x *= s.
  void scale(Tensor& x, float s);
  // x = tanh(x / cap) · cap (Gemma's logit soft-capping).
  void soft_cap(Tensor& x, float cap);
  // x[r, i] *= w[i]: w has x's last dimension.
  void mul_columns(Tensor& x, const Tensor& w);
  // x *= sigmoid(gate): gate has x's shape, or one value per row of x ([rows, 1]).
  void sigmoid_mul(Tensor& x, const Tensor& gate);
  // dst[r, dst_col + i] = src[r, src_col + i] for i < width, over 2-D src and
  // dst with the same number of rows.
  void copy_columns(const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col, int64_t width);
  // dst[i] = src[rows[i]] over 2-D tensors.
  void gather_rows(const Tensor& src, const std::vector<int32_t>& rows, Tensor& dst);
  // dst[rows[i]] += weights[i] · src[i] over 2-D tensors, in order of i.
  void scatter_add_rows(const Tensor& src, const std::vector<int32_t>& rows, const std::vector<float>& weights,
                        Tensor& dst);

  // --- Picking ---
  // ids[r] (i32) = the token rules[r] picks from row r of x [rows, vocab]
  // (f32): greedy (the first index of the largest value, NaNs never picked)
  // or drawn by the rule's uniform (cpu::pick_token's rule), so a step's
  // logits need not leave the device to be decoded.
  void pick_rows(const Tensor& x, std::span<const PickRule> rules, Tensor& ids);

  // --- Mixture of experts ---
  // Per row of logits [T, E]: softmax, the k most probable experts (ties to the
  // lower index) into ids [T, k] (i32) and their probabilities into weights
  // [T, k], renormalized to sum 1 when asked, then times expert_scale[id] when given.
  void route_top_k(const Tensor& logits, int64_t k, bool renormalize, const Tensor* expert_scale, Tensor& ids,
                   Tensor& weights);
  // y [T, hidden] ← Σ over each row's k choices (ids i32 and weights f32 [T, k],
  // as route_top_k leaves them) of weight · expert(x row), added in ascending
  // expert order (as transformers does). Experts no row picks are not read.
  void expert_mlps(const ExpertBank& bank, const Tensor& x, const Tensor& ids, const Tensor& weights, Tensor& y,
                   bool bf16_inputs);
  // Prepares a bank once, at load, for expert_mlps to run with the routing
  // left on the device (sets bank.device). Where the backend has no such
  // path for these weights it leaves the bank as it is.
  virtual void bind_experts(ExpertBank& bank) { (void)bank; }
  // Whether expert_mlps over `rows` rows of every bank bound so far keeps the
  // routing on the device, so that a step running it can be recorded
  // (run_step): the routing is read by no host code in the middle of it.
  virtual bool experts_on_device(int64_t rows) const { (void)rows; return false; }

  // --- Gated DeltaNet ---
  // Causal depthwise conv1d, then SiLU: x, out [T, channels]; weight [channels,
  // kernel], tap kernel − 1 on the current token; state [channels, kernel − 1]
  // holds the previous inputs, oldest first, and advances past these T.
  void causal_conv1d_silu(const Tensor& x, const Tensor& weight, Tensor& state, Tensor& out);
  // Per row of x [rows, cols], the `heads` vectors of head_dim values from
  // column first_col on: v ← v · scale / sqrt(Σv² + eps).
  void l2_norm_heads(Tensor& x, int64_t first_col, int64_t heads, int64_t head_dim, float scale, float eps);
  // In place over b, a [T, value_heads]: beta = sigmoid(b) into b and the log
  // decay g = neg_a · softplus(a + dt_bias) into a (neg_a = −exp(A_log)).
  void delta_rule_gates(Tensor& b, Tensor& a, const Tensor& neg_a, const Tensor& dt_bias);
  // The gated delta rule over T tokens. qkv [T, 2·key_dim + value_dim] holds q
  // (L2-normed and scaled), k (L2-normed) and v side by side; g, beta [T,
  // value_heads]; state [value_heads, key_head_dim, value_head_dim] advances;
  // out [T, value_dim]. chunk = 0 runs token by token (decode's arithmetic),
  // otherwise in blocks of `chunk` tokens. With `history` (token by token
  // only), the state after token i is also copied to history row
  // history_row + i where that row exists.
  void gated_delta_rule(const DeltaRuleShape& shape, const Tensor& qkv, const Tensor& g, const Tensor& beta,
                        int64_t chunk, Tensor& state, Tensor& out, Tensor* history = nullptr,
                        int64_t history_row = 0);
  // x ← w · x / rms(x) · silu(z) per row of x, z [rows, D], w [D].
  void gated_rms_norm(Tensor& x, const Tensor& z, const Tensor& w, float eps);

 protected:
  virtual void matmul_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool bf16_inputs) = 0;
  virtual void matmul_shared_impl(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs) = 0;
  virtual void rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& y) = 0;
  virtual void rope_impl(Tensor& x, const Tensor& cos, const Tensor& sin) = 0;
  virtual void silu_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  virtual void gelu_tanh_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  virtual void add_inplace_impl(Tensor& x, const Tensor& y) = 0;
  virtual void embedding_impl(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out) = 0;
  virtual void attention_impl(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p,
                              Tensor& out) = 0;
  // For a backend that attends sequence by sequence: attend(q's rows, the
  // view, p at the segment's first position, out's rows) per segment.
  using ViewAttention = std::function<void(const Tensor&, const KvView&, const AttentionParams&, Tensor&)>;
  static void attend_each_segment(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p,
                                  Tensor& out, const ViewAttention& attend);
  virtual void kv_write_impl(std::span<const KvSegment> segments, const Tensor& k, const Tensor& v) = 0;
  virtual void kv_read_impl(const KvView& kv, int64_t row, Tensor& k, Tensor& v) = 0;
  virtual Tensor empty_impl(std::vector<int64_t> shape, DType dtype) = 0;
  virtual Tensor reserve_impl(std::vector<int64_t> shape, DType dtype) = 0;
  virtual Tensor upload_impl(const Tensor& host) = 0;
  virtual Tensor download_impl(const Tensor& t) = 0;
  virtual void copy_impl(const Tensor& src, Tensor& dst) = 0;
  virtual void fill_impl(Tensor& x, float value) = 0;
  virtual void scale_impl(Tensor& x, float s) = 0;
  virtual void soft_cap_impl(Tensor& x, float cap) = 0;
  virtual void mul_columns_impl(Tensor& x, const Tensor& w) = 0;
  virtual void sigmoid_mul_impl(Tensor& x, const Tensor& gate) = 0;
  virtual void copy_columns_impl(const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col,
                                 int64_t width) = 0;
  virtual void gather_rows_impl(const Tensor& src, const std::vector<int32_t>& rows, Tensor& dst) = 0;
  virtual void scatter_add_rows_impl(const Tensor& src, const std::vector<int32_t>& rows,
                                     const std::vector<float>& weights, Tensor& dst) = 0;
  virtual void pick_rows_impl(const Tensor& x, std::span<const PickRule> rules, Tensor& ids) = 0;
  virtual void route_top_k_impl(const Tensor& logits, int64_t k, bool renormalize, const Tensor* expert_scale,
                                Tensor& ids, Tensor& weights) = 0;
  // The routing brought to the host, then each picked expert run once over
  // its rows gathered, its output scattered back with the rows' weights
  // (expert_mlps.cpp). A device overrides it where it keeps the routing.
  virtual void expert_mlps_impl(const ExpertBank& bank, const Tensor& x, const Tensor& ids, const Tensor& weights,
                                Tensor& y, bool bf16_inputs);
  virtual void causal_conv1d_silu_impl(const Tensor& x, const Tensor& weight, Tensor& state, Tensor& out) = 0;
  virtual void l2_norm_heads_impl(Tensor& x, int64_t first_col, int64_t heads, int64_t head_dim, float scale,
                                  float eps) = 0;
  virtual void delta_rule_gates_impl(Tensor& b, Tensor& a, const Tensor& neg_a, const Tensor& dt_bias) = 0;
  virtual void gated_delta_rule_impl(const DeltaRuleShape& shape, const Tensor& qkv, const Tensor& g,
                                     const Tensor& beta, int64_t chunk, Tensor& state, Tensor& out, Tensor* history,
                                     int64_t history_row) = 0;
  virtual void gated_rms_norm_impl(Tensor& x, const Tensor& z, const Tensor& w, float eps) = 0;
  // The fused pairs default to their two ops; a device overrides them where fusing pays.
  virtual void add_rms_norm_impl(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) {
    add_inplace_impl(x, y);
    rms_norm_impl(x, w, eps, out);
  }
  virtual void rms_norm_rope_impl(Tensor& x, const Tensor& w, float eps, const Tensor& cos, const Tensor& sin) {
    rms_norm_impl(x, w, eps, x);
    rope_impl(x, cos, sin);
  }
  // rope_kv_write's parts: rope (rms_norm_rope where norms are given) on q
  // and on k (a device's one launch), then the write.
  virtual void rope_qk_impl(Tensor& q, Tensor& k, const QkNorms& norms, const Tensor& cos, const Tensor& sin) {
    if (norms.q) {
      rms_norm_rope_impl(q, *norms.q, norms.eps, cos, sin);
      rms_norm_rope_impl(k, *norms.k, norms.eps, cos, sin);
    } else {
      rope_impl(q, cos, sin);
      rope_impl(k, cos, sin);
    }
  }
  virtual void rope_kv_write_impl(std::span<const KvSegment> segments, Tensor& q, Tensor& k, const Tensor& v,
                                  const QkNorms& norms, const Tensor& cos, const Tensor& sin) {
    rope_qk_impl(q, k, norms, cos, sin);
    kv_write_impl(segments, k, v);
  }

 private:
  OpProfile* profile_ = nullptr;
};

// The CPU backend on the process-wide thread pool; picks AVX-512, AVX2 or
// portable kernels from what the processor supports. An instance keeps
// scratch between ops, so each model (each thread of work) has its own.
std::shared_ptr<Backend> make_cpu_backend();
// The backend for a device named on the command line: "cpu", "cuda" or
// "cuda:N". A device this build or machine cannot run is an error that says why.
std::shared_ptr<Backend> make_backend(const std::string& device);
// What a --device name means: the kind and, for cuda, the index ("cuda" is 0).
struct DeviceSpec {
  Device kind = Device::cpu;
  int index = 0;
};
DeviceSpec parse_device(const std::string& device);
// The memory free on a GPU named by --device now (the memory contract's
// default budget there); an error where the device cannot be used.
int64_t gpu_free_bytes(const std::string& device);

}  // namespace fathom
