#pragma once
// Decode steps as CUDA graphs. A decode step of a small model is hundreds of
// tiny kernels; launched one by one from the host, the launches — not the
// GPU — set its pace. While a step is recorded, the backend's ops do not
// launch: each appends a call (a kernel with its arguments, or an opaque call
// such as a cuBLAS GEMM with a signature of everything it reads). At the end
// of the step the calls run as one graph. The graph of an earlier step with
// the same calls in the same order (same kernels, same opaque signatures) is
// replayed after updating the kernel nodes whose launch configuration or
// arguments changed (a decode step differs from the one before it only in a
// position, a KV length, a staged block table's address); anything else is
// captured anew.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
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

  bool is_kernel() const { return func != nullptr; }
  // Pointers to each argument, for cudaLaunchKernel and kernel node parameters.
  std::vector<void*> arg_pointers();
  bool same_launch(const RecordedCall& o) const;
};

// The calls of one step. Kept across steps: a call's buffers are reused by
// the call at the same place in the next step, so that recording a kernel
// of a step of the usual shape allocates nothing.
class StepRecorder {
 public:
  void begin() { size_ = 0; }
  template <typename... Params>
  void kernel(void (*func)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
              const std::type_identity_t<Params>&... values) {
    RecordedCall& c = next();
    c.func = reinterpret_cast<const void*>(func);
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
  // The step's calls (those of a longer earlier step dropped).
  std::vector<RecordedCall>& calls() {
    calls_.resize(size_);
    return calls_;
  }

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

// Instantiated graphs of recent steps, replayed while steps keep their shape.
class StepGraphCache {
 public:
  StepGraphCache();
  StepGraphCache(const StepGraphCache&) = delete;
  StepGraphCache& operator=(const StepGraphCache&) = delete;
  ~StepGraphCache();

  // Enqueues `calls` on `stream` as a graph: true where an earlier graph was
  // replayed, false where the calls were captured anew.
  bool run(std::vector<RecordedCall>& calls, cudaStream_t stream);
  // Runs the calls one by one (what a step does when graphs are off).
  static void run_eagerly(std::vector<RecordedCall>& calls, cudaStream_t stream);

  const Backend::StepReplays& counts() const { return counts_; }
  // Adds a replayed step's times to the counts.
  void add_times(double host_seconds, double gpu_seconds) {
    counts_.host_seconds += host_seconds;
    counts_.gpu_seconds += gpu_seconds;
  }
  // Backend::step_graph_costs for the most recently run graph, each timing a
  // median of `rounds` of `repeats` launches back to back (waits for the stream).
  Backend::StepGraphCosts kernel_costs(cudaStream_t stream, int rounds, int repeats);

 private:
  struct Graph;
  void capture(std::vector<RecordedCall>& calls, cudaStream_t stream, uint64_t key);

  std::vector<std::unique_ptr<Graph>> graphs_;  // most recently used last
  Backend::StepReplays counts_;
};

}  // namespace fathom::cuda
