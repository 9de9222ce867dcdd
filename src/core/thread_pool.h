#pragma once
// A persistent pool for data-parallel kernels. Decode runs hundreds of parallel
// regions per token, so workers spin briefly between regions instead of sleeping
// on a condition variable (a wake-up costs more than a small GEMV).
//
// Work is handed out, not assigned: a region is a count of items, and every
// thread (the caller included) takes the next item from a shared counter until
// none are left. A thread that is held back (a busy core, a hypervisor that
// has descheduled the vCPU) then costs the region only the item it holds, and
// the region ends when its items are done, not when every worker has checked in.
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

  // Calls fn(slot, size()) once for each slot in [0, size()), on whichever
  // threads take them, and returns when all are done. Two calls never run at
  // once with the same slot, so a slot may own scratch. Not reentrant.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into contiguous chunks, each a multiple of `align` except the
  // last, a few per thread so that a slow thread's share is taken by the
  // others; calls fn(begin, end) once per chunk.
  void parallel_for(int64_t n, int64_t align, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool; sized by set_global_threads (default: hardware threads).
  // Backends keep a reference to it, so size it before the first backend exists.
  static ThreadPool& global();
  static void set_global_threads(int threads);

 private:
  using Item = std::function<void(int)>;
  // Runs item(i) for every i in [0, items) across the pool.
  void dispatch(int items, const Item& item);
  // Takes items of the current region until none are left.
  void take_items();
  void worker_loop();

  std::vector<std::thread> workers_;
  // The current region: its item function, and one word whose high half is the
  // region's item count and whose low half the next item to take. Taking is a
  // fetch_add on that word, so a worker that arrives after the region ended
  // (the caller stored a new word, or the old one is used up) can only ever
  // take an item of the region that is current at that moment.
  std::atomic<const Item*> job_{nullptr};
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace fathom
