#pragma once
// The CUDA implementation of Backend (included by the .cu files only). One
// stream per backend: every op is enqueued on it in call order, so ops see each
// other's results without extra synchronization; download() waits for the
// stream. Allocations are stream-ordered (cudaMallocAsync) and counted per
// device for the memory contract. Matmuls go through cuBLAS where its types
// fit, elsewhere through a tiled kernel; the other ops are kernels here.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/kernel_overlap.h"
#include "backend/cuda/kv_layout.h"
#include "backend/cuda/piece_growth.h"
#include "backend/cuda/step_arena.h"
#include "backend/cuda/step_graph.h"

namespace fathom::cuda {

// Throws a fathom::Error naming the operation when a CUDA call fails.
void check_cuda(cudaError_t status, const char* what);
void check_cublas(cublasStatus_t status, const char* what);

// Whether p allows 16-byte vector accesses (the float4 / uint4 kernels).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What outlives the backend object: tensors it allocated free themselves on
// this stream, so they hold it.

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::string name;
  int sm_count = 1;
  // Kernels launched to overlap the one before them (kernel_overlap.h): on
  // Hopper and later, unless FATHOM_CUDA_OVERLAP=0.
  bool overlap_kernels = false;
  // Whether the small kernels between two matmuls (norms, the activation,
  // attention's combine) let the next kernel be placed before they wait
  // (kernel_overlap.h): set by a matmul whose every launch was the one-row
  // integer GEMV (affine_plane_gemv.cu), whose grid is one wave of resident
  // blocks: a decode layer's matmuls being of one kind, the next one's
  // blocks then stream their first weights during the tail of the one
  // before. 8B shape, batch 1, H100: q4 g64 +4% (360 -> 373 tok/s);
  // before the bf16 GEMV (a block per 8 rows, first asking L2 for its
  // lines) it lost 4%, so any other matmul turns it off.
  bool release_before_wait = false;
  // Pinned host memory that small host-to-device copies pass through, used as
  // a ring: a copy from pageable memory would wait for the stream to drain,
  // which stops the host from running ahead of the GPU. The stream is
  // synchronized only when the ring wraps.
  char* pinned = nullptr;
  size_t pinned_bytes = 0, pinned_head = 0;
  // While a step is being recorded its calls have not run yet: device memory
  // let go of meanwhile is freed only after the step's graph is enqueued.
  bool recording = false;
  std::vector<void*> deferred_frees;
  // Around each replayed step graph, for StepReplays' GPU time.
  cudaEvent_t graph_start = nullptr, graph_end = nullptr;
  ~Context();
};

struct HeadRows;  // head_rows.h

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  std::string name() const override { return ctx_->name; }
  Device device() const override { return Device::cuda; }
  void release_pages(void*, int64_t) override {}  // device memory stays with its slab
  cudaStream_t stream() const { return ctx_->stream; }
  // Small steps (decode, verify spans) are recorded and run as CUDA graphs
  // unless FATHOM_CUDA_GRAPHS=0 (step_graph.h).
  void run_step(const std::function<void()>& step) override;
  StepReplays step_replays() const override { return graphs_.counts(); }
  StepGraphCosts step_graph_costs() override { return graphs_.kernel_costs(ctx_->stream, 5, 20); }
  // Banks of bf16, f32 or 4-/8-bit coded experts run with the routing on the
  // GPU (expert_mlps.cu) for steps of up to kExpertRowsOnDevice rows (a
  // recorded step's most); other formats, and longer steps, take the host's.
  void bind_experts(ExpertBank& bank) override;
  bool experts_on_device(int64_t rows) const override;
  static constexpr int64_t kExpertRowsOnDevice = 64;

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
  Tensor upload_impl(const Tensor& host) override;
  Tensor download_impl(const Tensor& t) override;
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
  void expert_mlps_impl(const ExpertBank& bank, const Tensor& x, const Tensor& ids, const Tensor& weights, Tensor& y,
                        bool bf16_inputs) override;

  void causal_conv1d_silu_impl(const Tensor& x, const Tensor& weight, Tensor& state, Tensor& out) override;
  void l2_norm_heads_impl(Tensor& x, int64_t first_col, int64_t heads, int64_t head_dim, float scale,
                          float eps) override;
  void delta_rule_gates_impl(Tensor& b, Tensor& a, const Tensor& neg_a, const Tensor& dt_bias) override;
  void gated_delta_rule_impl(const DeltaRuleShape& shape, const Tensor& qkv, const Tensor& g, const Tensor& beta,
                             int64_t chunk, Tensor& state, Tensor& out, Tensor* history, int64_t history_row) override;
  void gated_rms_norm_impl(Tensor& x, const Tensor& z, const Tensor& w, float eps) override;
  void add_rms_norm_impl(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) override;
  void rms_norm_rope_impl(Tensor& x, const Tensor& w, float eps, const Tensor& cos, const Tensor& sin) override;
  void rope_qk_impl(Tensor& q, Tensor& k, const QkNorms& norms, const Tensor& cos, const Tensor& sin) override;
  void rope_kv_write_impl(std::span<const KvSegment> segments, Tensor& q, Tensor& k, const Tensor& v,
                          const QkNorms& norms, const Tensor& cos, const Tensor& sin) override;

 private:
  // Host data an op needs on the device (ids, rows, weights, a block table):
  // copied into a buffer of its own kind that only grows.
  void* stage(int slot, const void* host, size_t bytes);
  // dst (device) ← host bytes, through the pinned ring when they fit in it.
  void copy_to_device(void* dst, const void* host, size_t bytes);
  // Device memory of a tensor-less scratch kind that only grows.
  void* scratch(int slot, size_t bytes);
  // kv_write (write) or kv_read over rows [row, row + k.dim(0)) of the view.
  void kv_rows_impl(const KvView& kv, int64_t row, const Tensor& k, const Tensor& v, bool write);
  // Every step row's KvRowRef on the device, the segments' block tables staged with them.
  const KvRowRef* stage_rows(std::span<const KvSegment> segments);
  // rms_norm (y null) or add_rms_norm over rows held in registers, where d
  // and the pointers suit it; false leaves the op to the general kernel.
  bool norm_rows_fast(const char* op, float* x, const float* y, const float* w, float eps, int64_t d, int64_t rows,
                      float* out);
  // RoPE, or rms_norm then RoPE, over q's head vectors and k's in one launch (cuda_ops.cu).
  void rope_heads(const HeadRows& x, int64_t head_dim, const Tensor& cos, const Tensor& sin);
  void norm_rope_heads(const HeadRows& x, int64_t head_dim, float eps, const Tensor& cos, const Tensor& sin);
  // out ← act(gate) · up, four values a thread where the sizes and pointers
  // allow (x4), else one.
  void gate_mul(const char* op, void (*x4)(const float4*, const float4*, float4*, int64_t, bool),
                void (*one)(const float*, const float*, float*, int64_t), const Tensor& gate, const Tensor& up,
                Tensor& out);
  // out [rows, d] ← the splits' partials (attention_split_kernel's layout) combined.
  void combine_splits(const float* partial, int64_t rows, int64_t splits, int64_t d, float* out);
  // Attention over one view (one sequence's rows of a step, or all of them
  // where the decode kernel does not take the step whole).
  void attend_view(const Tensor& q, const KvView& kv, const AttentionParams& p, Tensor& out);
  // Whether the decode kernel takes every segment of the step in one launch
  // (plain bf16 rows of one format, a few rows per sequence), and that launch.
  static bool decode_kernel_takes(const Tensor& q, std::span<const KvSegment> segments);
  void attention_decode(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p, Tensor& out);
  // The queries as the attention kernels read them: a codebook view's scores
  // are taken in its rotated space (Rq·Rk = q·k), so its queries are rotated
  // into a scratch copy and `signs` set, for the output to be rotated back.
  const float* queries_for(const Tensor& q, const KvView& kv, const float*& signs);
  // x [rows, d] ← the codebook rotation of each row (or its inverse).
  void rotate_rows(float* x, int64_t rows, int64_t d, const float* signs, bool inverse);
  // The rotation signs of a codebook view on the device (built once per seed and dim).
  const float* rotation_signs(const KvView& kv);
  // How many splits the keys of an attention take, for `blocks` blocks per
  // split: two blocks per SM, down to `min_keys` keys a split, within the
  // partials' cap (`rows` query rows × heads, times splits).
  int64_t key_splits(int64_t blocks, int64_t keys, int64_t min_keys, int64_t rows) const;
  // Attention of several query rows (prefill chunks; decode-sized steps the
  // decode kernel does not take) over plain bf16 rows in bf16 compute, on
  // tensor cores (attention_flash.cu): out directly when splits is 1, else
  // each split's partial for the combine.
  // The draws of the rows whose rule ranks its candidates (top-k, top-p:
  // pick_ranked.cu), after pick_rows_impl's kernels put each row's best in ids.
  void draw_ranked_rows(const float* x, int64_t rows, int64_t n, std::span<const PickRule> rules,
                        const PickRule* dev_rules, int32_t* ids);
  static bool flash_attention_suits(const KvView& kv, const AttentionParams& p, int64_t t);
  int64_t flash_attention_splits(const KvView& kv, int64_t t, int64_t heads) const;
  void flash_attention(const KvLayout& l, unsigned char* const* table, const float* q, int64_t t, int64_t heads,
                       const KvView& kv, const AttentionParams& p, int64_t splits, float* partial, float* out);

  // Launches `kernel` now, or records it while a step is recorded; where the
  // device can, to overlap the kernel before it (kernel_overlap.h).
  template <typename... Params>
  void launch(const char* op, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
              std::type_identity_t<Params>... args) {
    if (recorder_) {
      recorder_->kernel(kernel, grid, block, shared_bytes, ctx_->overlap_kernels, args...);
      return piece_recorded();
    }
    void* pointers[] = {&args..., nullptr};
    enqueue_kernel(op, reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, pointers, stream(),
                   ctx_->overlap_kernels);
    if (sync_ops_) check_cuda(cudaStreamSynchronize(stream()), op);
  }
  // Enqueues work that is not one of our kernels (cuBLAS, a copy) now, or
  // records it; `signature` holds everything the work depends on.
  void enqueue(std::vector<uint64_t> signature, std::function<void(cudaStream_t)> run) {
    if (recorder_) {
      recorder_->opaque(std::move(signature), std::move(run));
      return piece_recorded();
    }
    run(stream());
    if (sync_ops_) check_cuda(cudaStreamSynchronize(stream()), "wait for the stream");
  }
  // Decode's bf16 matmuls of one row (gemv.cu): y[N] (+ bias) = w[N, K] · x[K]
  // with bf16 products for each output, all outputs in one launch, x read as
  // f32 and rounded on the way. From 2 rows on cuBLAS's GEMM takes less time
  // (8B, a whole step: 2 rows on the GEMV 6.62 ms, 3 rows on cuBLAS 6.31;
  // 8 rows 842 against 625 tok/s).
  static constexpr int64_t kGemvMaxRows = 1;
  struct GemvOutput {
    const Tensor* w;
    const float* bias;  // or null
    float* y;
  };
  static bool gemv_suits(int64_t M, int64_t K, const Tensor& w);
  void gemv_bf16(const float* x, int64_t K, std::span<const GemvOutput> outputs);
  // y (+ bias) = x · wᵀ over quantized weights (affine_matmul.cu): up to
  // cuda_memory::affine_gemv_max_rows rows of x from the packed codes, the
  // targets of one code width together; longer x one target at a time, its
  // weight widened a panel of rows at a time for cuBLAS (xs: x rounded to
  // bf16 in bf16 compute, else x). True when every launch was the one-row
  // integer GEMV (affine_plane_gemv.cu).
  bool affine_gemv(const Tensor& x, std::span<const MatmulTarget* const> targets, bool bf16_inputs);
  // The tensor-core GEMV for 4- and 8-bit codes in bf16 compute, 1-16 rows
  // (affine_mma_gemv.cu): whether it takes w, and one launch of up to four
  // targets of one code width and group size.
  static bool affine_mma_suits(int64_t M, const Tensor& w, bool bf16_inputs);
  void affine_mma_gemv(const float* x, int64_t M, int64_t K, std::span<const MatmulTarget* const> targets);
  // The same for 1-2 rows of x over groups of 8-bit codes of 64 or more, or
  // 4-bit codes of 128, codes loaded straight into registers
  // (affine_direct_gemv.cu): whether it takes M rows of K (x is staged
  // whole in shared memory), and one launch, whose targets also share the
  // dtype of their scales.
  static bool affine_direct_suits(int64_t M, int64_t K, int bits, int group);
  void affine_direct_gemv(const float* x, int64_t M, int64_t K, std::span<const MatmulTarget* const> targets);
  // The same for one row of x over 4- and 8-bit codes in groups of 32-128
  // on the integer tensor cores, x as three planes of signed bytes
  // (affine_plane_gemv.cu; taken before the direct kernel): whether it takes
  // M rows of K (x's planes are staged whole in shared memory), and one
  // launch, whose targets also share the dtype of their scales.
  static bool affine_plane_suits(int64_t M, int64_t K, int bits, int group);
  void affine_plane_gemv(const float* x, int64_t M, int64_t K, std::span<const MatmulTarget* const> targets);
  void affine_panels(const MatmulTarget& t, int64_t M, int64_t K, const void* xs, bool bf16_inputs);
  // out[i] = the dequantized row ids[i] (device ids) of a quantized table.
  void affine_embedding(const Tensor& table, const int32_t* ids, int64_t n, Tensor& out);
  // y[M, N] (row stride ldy) = x[M, K] · w[N, K]ᵀ, or y += that, through
  // cuBLAS: both of `type` (bf16 with f32 sums, or f32 with exact f32 products).
  void gemm(const void* w, const void* xs, cudaDataType type, int64_t M, int64_t N, int64_t K, float* y, int64_t ldy,
            bool accumulate);
  // A recorded step runs in pieces (step_graph.h): the first of
  // kFirstPieceCalls calls, each next one piece_growth_.factor() times as
  // long as the one before (piece_growth.h).
  static constexpr size_t kFirstPieceCalls = 8;
  struct StepPieces {
    std::chrono::steady_clock::time_point started;
    size_t start = 0, length = kFirstPieceCalls;  // the piece being recorded
    int launched = 0;
    double lead_seconds = 0.0;
  };
  // After a call is recorded: launches the piece once it is long enough.
  void piece_recorded() {
    if (recorder_->size() - step_pieces_.start >= step_pieces_.length) launch_piece();
  }
  // Runs the calls recorded since the last piece (their staged data copied up first).
  void launch_piece();
  // Counted device memory that stays until its tensor lets go.
  Tensor allocate(std::vector<int64_t> shape, DType dtype);
  // Host memory for a recorded step's download (its logits): pinned, so the
  // copy runs at the bus's pace without passing through the driver's staging
  // buffers; a buffer is taken again once no tensor holds it. Past
  // kPinnedDownloads buffers held at once, ordinary host memory. Eager
  // downloads up to kPinnedDownloadBytes take them too.
  Tensor pinned_host_tensor(std::vector<int64_t> shape, DType dtype);
  static constexpr size_t kPinnedDownloads = 8, kPinnedDownloadBytes = size_t(64) << 20;
  // dst ← src, bytes of device memory (now, or recorded).
  void device_copy(void* dst, const void* src, size_t bytes);

  std::shared_ptr<Context> ctx_;
  bool graphs_enabled_ = true;
  // Environment switches for measuring: FATHOM_CUDA_GEMV=0 sends decode's
  // matmuls to cuBLAS; FATHOM_CUDA_SYNC_OPS=1 waits for each launch, so that
  // `bench --profile-ops` (with graphs off) shows each op's GPU time.
  bool gemv_enabled_ = true, sync_ops_ = false;
  StepRecorder* recorder_ = nullptr;  // &step_recorder_ while a step is recorded
  StepRecorder step_recorder_;
  StepPieces step_pieces_;
  PieceGrowth piece_growth_;
  StepArena arena_;
  StepGraphCache graphs_;
  Tensor workspace_;
  std::vector<std::pair<Tensor, const void*>> pending_downloads_;  // host tensor, device source
  struct PinnedBuffer;  // cuda_backend.cu
  std::vector<std::shared_ptr<PinnedBuffer>> pinned_downloads_;
  std::map<int, Tensor> buffers_;
  std::vector<void*> staged_tables_;    // stage_rows' host side, reused
  std::vector<KvRowRef> staged_rows_;
  std::map<std::pair<uint64_t, int64_t>, Tensor> signs_;
  int64_t unbound_expert_banks_ = 0;  // banks bind_experts left to the host's routing
};

// Slots of CudaBackend::stage / scratch.
enum Slot : int { kIds, kRows, kWeights, kBlockTable, kRowRefs, kRoundedX, kRotatedQ, kPartials, kDequantPanel, kPickRules };

}  // namespace fathom::cuda
