#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define FATHOM_PAUSE() _mm_pause()
#else
#define FATHOM_PAUSE() std::this_thread::yield()
#endif

namespace fathom {
namespace {
// Spin this long after a region before falling back to yielding sleeps.
constexpr auto kSpinWindow = std::chrono::microseconds(2000);
}  // namespace

ThreadPool::ThreadPool(int threads) {
  check(threads >= 1, "thread pool: thread count must be >= 1, got ", threads);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto spin_start = std::chrono::steady_clock::now();
    uint64_t gen;
    int spins = 0;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
      FATHOM_PAUSE();
      if (++spins % 256 == 0) {
        if (std::chrono::steady_clock::now() - spin_start > kSpinWindow)
          generation_.wait(seen, std::memory_order_acquire);
        else
          std::this_thread::yield();
      }
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, size());
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (workers_.empty()) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(int(workers_.size()), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, size());
  // Yield now and then: if a worker shares our core (an oversubscribed
  // machine), spinning alone would keep it from finishing.
  for (int spins = 1; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    FATHOM_PAUSE();
    if (spins % 256 == 0) std::this_thread::yield();
  }
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t align,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t units = (n + align - 1) / align;
  const int threads = int(std::min<int64_t>(size(), units));
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  run([&](int t, int) {
    if (t >= threads) return;
    int64_t begin = units * t / threads * align;
    int64_t end = std::min(n, units * (t + 1) / threads * align);
    if (begin < end) fn(begin, end);
  });
}

namespace {
std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
std::mutex global_mutex;
}  // namespace

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(global_mutex);
  auto& slot = global_slot();
  if (!slot) slot = std::make_unique<ThreadPool>(std::max(1u, std::thread::hardware_concurrency()));
  return *slot;
}

void ThreadPool::set_global_threads(int threads) {
  std::lock_guard<std::mutex> lock(global_mutex);
  check(threads >= 1, "threads: must be >= 1, got ", threads);
  auto& slot = global_slot();
  if (slot && slot->size() == threads) return;
  slot.reset();
  slot = std::make_unique<ThreadPool>(threads);
}

}  // namespace fathom
