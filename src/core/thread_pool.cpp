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
// parallel_for's chunks per thread: enough that the others can absorb a held-back
// thread's share, few enough that taking one stays cheap next to its work.
constexpr int64_t kChunksPerThread = 4;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  check(threads >= 1, "thread pool: thread count must be >= 1, got ", threads);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
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
    take_items();
  }
}

void ThreadPool::take_items() {
  for (;;) {
    const uint64_t word = claim_.fetch_add(1, std::memory_order_acq_rel);
    const uint32_t item = uint32_t(word), items = uint32_t(word >> 32);
    if (item >= items) return;
    // A valid item keeps its region open until it is done, so job_ is still that region's.
    (*job_.load(std::memory_order_relaxed))(int(item));
    done_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::dispatch(int items, const Item& item) {
  if (workers_.empty() || items <= 1) {
    for (int i = 0; i < items; ++i) item(i);
    return;
  }
  job_.store(&item, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(uint64_t(items) << 32, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  take_items();
  // Yield now and then: if a worker holding an item shares our core (an
  // oversubscribed machine), spinning alone would keep it from finishing.
  for (int spins = 1; done_.load(std::memory_order_acquire) != items; ++spins) {
    FATHOM_PAUSE();
    if (spins % 256 == 0) std::this_thread::yield();
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  const int slots = size();
  dispatch(slots, [&](int slot) { fn(slot, slots); });
}

void ThreadPool::parallel_for(int64_t n, int64_t align,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t units = (n + align - 1) / align;
  const int chunks = int(std::min<int64_t>(int64_t(size()) * kChunksPerThread, units));
  if (chunks <= 1 || size() == 1) {
    fn(0, n);
    return;
  }
  // One pointer captured: the item function fits std::function's inline
  // storage, so a region on the decode path allocates nothing.
  const struct {
    int64_t n, align, units, chunks;
    const std::function<void(int64_t, int64_t)>& fn;
  } split{n, align, units, chunks, fn};
  dispatch(chunks, [s = &split](int c) {
    const int64_t begin = s->units * c / s->chunks * s->align;
    const int64_t end = std::min(s->n, s->units * (c + 1) / s->chunks * s->align);
    if (begin < end) s->fn(begin, end);
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
