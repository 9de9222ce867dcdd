// The CPU implementation of Backend: argument checks happened in Backend;
// here each op splits its work over the thread pool and calls a kernel.
#include <algorithm>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace fathom {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend() : pool_(ThreadPool::global()), isa_(cpu::detect_isa()), kernels_(cpu::kernels_for(isa_)) {}

  std::string name() const override { return std::string("cpu-") + cpu::isa_name(isa_); }

 protected:
  void matmul_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool bf16_inputs) override {
    const MatmulTarget target{&w, bias, &y};
    matmul_shared_impl(x, {&target, 1}, bf16_inputs);
  }

  void matmul_shared_impl(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs) override {
    cpu::MatmulArgs base;
    base.M = x.dim(0);
    base.K = x.dim(1);
    base.x = x.data<float>();
    if (bf16_inputs) {
      // Round x to bf16 once. Kernels without a bf16 dot product multiply
      // the rounded values widened back to f32, which gives the same products.
      const int64_t n = base.M * base.K;
      bf16_t* rounded_bf16 = grow(rounded_bf16_, n, DType::bf16).data<bf16_t>();
      float* rounded = kernels_.bf16_dot ? nullptr : grow(rounded_, n, DType::f32).data<float>();
      small_parallel_for(n, 64, [&](int64_t i0, int64_t i1) {
        kernels_.to_bf16(base.x + i0, i1 - i0, rounded_bf16 + i0);
        if (rounded)
          for (int64_t i = i0; i < i1; ++i) rounded[i] = bf16_to_f32(rounded_bf16[i]);
      });
      base.xb = rounded_bf16;
      if (rounded) base.x = rounded;
    }
    // The outputs side by side: one split of their total N across threads.
    std::vector<cpu::MatmulArgs> args;
    std::vector<int64_t> first_column;
    int64_t total = 0;
    for (const auto& t : targets) {
      cpu::MatmulArgs a = base;
      a.N = t.w->dim(0);
      a.w = t.w->raw();
      a.w_dtype = t.w->dtype();
      a.bias = t.bias ? t.bias->data<float>() : nullptr;
      a.y = t.y->data<float>();
      args.push_back(a);
      first_column.push_back(total);
      total += a.N;
    }
    auto slice = kernels_.matmul;
    pool_.parallel_for(total, 16, [&](int64_t n0, int64_t n1) {
      for (size_t i = 0; i < args.size(); ++i) {
        const int64_t lo = std::max(n0, first_column[i]), hi = std::min(n1, first_column[i] + args[i].N);
        if (lo < hi) slice(args[i], lo - first_column[i], hi - first_column[i]);
      }
    });
  }

  void rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& y) override {
    const int64_t d = w.numel();
    small_parallel_for(x.numel(), d, [&](int64_t i0, int64_t i1) {
      const int64_t r0 = i0 / d, r1 = i1 / d;
      cpu::rms_norm_rows(x.data<float>(), w.data<float>(), eps, d, r0, r1, y.data<float>());
    });
  }

  void rope_impl(Tensor& x, const Tensor& cos, const Tensor& sin) override {
    const int64_t t = x.dim(0);
    auto body = [&](int64_t t0, int64_t t1) {
      cpu::rope_rows(x.data<float>(), cos.data<float>(), sin.data<float>(), x.dim(1), x.dim(2), cos.dim(1), t0, t1);
    };
    if (t == 1) body(0, 1);  // one token: not worth waking the pool
    else pool_.parallel_for(t, 1, body);
  }

  void silu_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) override {
    small_parallel_for(gate.numel(), 64, [&](int64_t i0, int64_t i1) {
      kernels_.silu_mul(gate.data<float>(), up.data<float>(), out.data<float>(), i0, i1);
    });
  }

  void gelu_tanh_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) override {
    small_parallel_for(gate.numel(), 64, [&](int64_t i0, int64_t i1) {
      kernels_.gelu_tanh_mul(gate.data<float>(), up.data<float>(), out.data<float>(), i0, i1);
    });
  }

  void add_inplace_impl(Tensor& x, const Tensor& y) override {
    cpu::add_range(x.data<float>(), y.data<float>(), 0, x.numel());
  }

  void embedding_impl(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out) override {
    const int64_t d = table.dim(1);
    const size_t row_bytes = size_t(d) * dtype_size(table.dtype());
    for (size_t i = 0; i < ids.size(); ++i)
      cpu::widen_row(static_cast<const char*>(table.raw()) + size_t(ids[i]) * row_bytes, table.dtype(), d,
                     out.data<float>() + int64_t(i) * d);
  }

  void attention_impl(const Tensor& q, const KvView& kv, const AttentionParams& p, Tensor& out) override {
    const int64_t t = q.dim(0), heads = q.dim(1);
    const int threads = pool_.size();
    scratch_.resize(size_t(threads));
    for (auto& s : scratch_) grow(s, cpu::attention_scratch_floats(kv, heads, t), DType::f32);
    // A few rows (a speculative verify step) go one query row per tile, each
    // through decode's path: a verified position sees what decode would give it.
    const int64_t rows = t <= kDecodeLikeRows ? 1 : cpu::attention_tile_rows(heads, kv.kv_heads());
    const int64_t row_blocks = (t + rows - 1) / rows;
    const int64_t tiles = row_blocks * kv.kv_heads();
    // Tiles are dealt round-robin: causal rows get costlier down the chunk,
    // so contiguous ranges would leave one thread with most of the work.
    pool_.run([&](int thread, int count) {
      for (int64_t i = thread; i < tiles; i += count) {
        const int64_t block = i / kv.kv_heads(), g = i % kv.kv_heads();
        const int64_t t0 = block * rows, t1 = std::min(t, t0 + rows);
        cpu::attention_tile(kernels_, q.data<float>(), heads, kv, p, g, t0, t1, scratch_[thread].data<float>(), out.data<float>());
      }
    });
  }

 private:
  // Elementwise work below this many elements runs on the calling thread: at
  // decode, waking the pool costs more than the work.
  static constexpr int64_t kInlineElements = 32768;
  static constexpr int64_t kDecodeLikeRows = 16;
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

  ThreadPool& pool_;
  cpu::Isa isa_;
  cpu::Kernels kernels_;
  Tensor rounded_;
  Tensor rounded_bf16_;
  std::vector<Tensor> scratch_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace fathom
