#pragma once
// A persistent pool for data-parallel kernels. Decode runs hundreds of parallel
// regions per token, so workers spin briefly between regions instead of sleeping
// on a condition variable (a wake-up costs more than a small GEMV).
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace fathom {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Runs fn(thread_index, thread_count) on every thread (the caller is thread 0)
  // and returns when all are done. Not reentrant.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into contiguous ranges, one per thread, each a multiple of
  // `align` except the last; calls fn(begin, end) for non-empty ranges.
  void parallel_for(int64_t n, int64_t align, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool; sized by set_global_threads (default: hardware threads).
  // Backends keep a reference to it, so size it before the first backend exists.
  static ThreadPool& global();
  static void set_global_threads(int threads);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
};

}  // namespace fathom
