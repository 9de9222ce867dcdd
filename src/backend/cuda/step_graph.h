#pragma once
// Decode steps as CUDA graphs. A decode step of a small model is hundreds of
// tiny kernels; launched one by one from the host, the launches — not the
// GPU — set its pace. While a step is recorded, the backend's ops do not
// launch: each appends a call (a kernel with its arguments, or an opaque call
// such as a cuBLAS GEMM with a signature of everything it reads). The calls
// run as graphs, a piece of the step at a time: the first piece as soon as it
// is recorded, so that the GPU works while the host records the rest (pieces
// double in length, so the GPU stays ahead). The graph of an earlier step's
// piece at the same place with the same calls in the same order (same
// kernels, same opaque signatures) is replayed after updating the kernel
// nodes whose launch configuration or arguments changed (a decode step
// differs from the one before it only in a position, a KV length, a staged
// block table's address); anything else is captured anew.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "backend/backend.h"

namespace fathom::cuda {

struct RecordedCall {
  // A kernel launch: func with its grid, block, dynamic shared memory and
  // arguments (each at its offset in `args`, as cudaLaunchKernel reads them).
  const void* func = nullptr;
  dim3 grid, block;
  size_t shared_bytes = 0;
  std::vector<unsigned char> args;
  std::vector<uint32_t> offsets;
  // Otherwise an opaque call: `run` enqueues it on the stream; `signature`
  // holds every value it depends on (pointers, sizes, types), so two calls
  // with equal signatures enqueue the same work.
  std::vector<uint64_t> signature;
  std::function<void(cudaStream_t)> run;

  bool overlap = false;  // launched to overlap the kernel before it (kernel_overlap.h)

  bool is_kernel() const { return func != nullptr; }
  // Pointers to each argument, for cudaLaunchKernel and kernel node parameters.
  std::vector<void*> arg_pointers();
  bool same_launch(const RecordedCall& o) const;
};

// Enqueues kernel `func` with its argument pointers; `overlap` launches it
// to overlap the kernel before it on the stream (kernel_overlap.h). A launch
// error is thrown naming `op`.
void enqueue_kernel(const char* op, const void* func, dim3 grid, dim3 block, size_t shared_bytes, void** args,
                    cudaStream_t stream, bool overlap);

// The calls of one step. Kept across steps: a call's buffers are reused by
// the call at the same place in the next step, so that recording a kernel
// of a step of the usual shape allocates nothing.
class StepRecorder {
 public:
  void begin() { size_ = 0; }
  template <typename... Params>
  void kernel(void (*func)(Params...), dim3 grid, dim3 block, size_t shared_bytes, bool overlap,
              const std::type_identity_t<Params>&... values) {
    RecordedCall& c = next();
    c.func = reinterpret_cast<const void*>(func);
    c.overlap = overlap;
    c.grid = grid;
    c.block = block;
    c.shared_bytes = shared_bytes;
    (append_arg(c, values), ...);
  }
  void opaque(std::vector<uint64_t> signature, std::function<void(cudaStream_t)> run) {
    RecordedCall& c = next();
    c.signature = std::move(signature);
    c.run = std::move(run);
  }
  // Drops what opaque calls hold (tensors among it) once the step is enqueued.
  void drop_closures() {
    for (size_t i = 0; i < size_ && i < calls_.size(); ++i) calls_[i].run = nullptr;
  }
  size_t size() const { return size_; }
  // Calls [from, to) of the step.
  std::span<RecordedCall> range(size_t from, size_t to) { return {calls_.data() + from, to - from}; }

 private:
  RecordedCall& next() {
    if (size_ == calls_.size()) calls_.emplace_back();
    RecordedCall& c = calls_[size_++];
    c.func = nullptr;
    c.shared_bytes = 0;
    c.args.clear();
    c.offsets.clear();
    c.signature.clear();
    c.run = nullptr;
    return c;
  }
  template <typename T>
  static void append_arg(RecordedCall& c, const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are copied as bytes");
    const size_t at = (c.args.size() + alignof(T) - 1) / alignof(T) * alignof(T);
    c.args.resize(at + sizeof(T), 0);
    std::memcpy(c.args.data() + at, &value, sizeof(T));
    c.offsets.push_back(uint32_t(at));
  }

  std::vector<RecordedCall> calls_;
  size_t size_ = 0;
};

// Instantiated graphs of the pieces of recent steps, replayed while steps
// keep their shape.
class StepGraphCache {
 public:
  StepGraphCache();
  StepGraphCache(const StepGraphCache&) = delete;
  StepGraphCache& operator=(const StepGraphCache&) = delete;
  ~StepGraphCache();

  // Starts a step: the next run() is its first piece.
  void begin_step() {
    step_.clear();
    step_captured_ = step_eager_ = false;
  }
  // Enqueues the step's next piece, `calls`, on `stream` as a graph: an
  // earlier one replayed, or the calls captured anew.
  void run(std::span<RecordedCall> calls, cudaStream_t stream);
  // Runs the calls one by one (what a step does when graphs are off); the
  // step then has no graphs to profile.
  void run_eagerly(std::span<RecordedCall> calls, cudaStream_t stream);
  // Counts the step begun last, all of whose pieces ran as graphs: `lead` is
  // the host's time before its first piece was launched, `host` before its
  // last, `gpu` (or a negative time where unknown) its graphs' time.
  // Returns whether it was counted: a replay (not captured, not eager).
  bool count_step(double lead_seconds, double host_seconds, double gpu_seconds);

  const Backend::StepReplays& counts() const { return counts_; }
  // Backend::step_graph_costs for the pieces of the step run last, each
  // timing a median of `rounds` of `repeats` launches of the whole step back
  // to back (waits for the stream).
  Backend::StepGraphCosts kernel_costs(cudaStream_t stream, int rounds, int repeats);

 private:
  struct Graph;
  Graph* capture(std::span<RecordedCall> calls, cudaStream_t stream, uint64_t key,
                 std::vector<std::unique_ptr<Graph>>& graphs);

  // Each piece's graphs by the piece's place in its step, most recently used last.
  std::vector<std::vector<std::unique_ptr<Graph>>> pieces_;
  std::vector<Graph*> step_;  // the graphs of the step run last, in order
  bool step_captured_ = false, step_eager_ = false;
  Backend::StepReplays counts_;
};

}  // namespace fathom::cuda
