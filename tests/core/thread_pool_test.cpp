#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace fathom {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnceWithAlignedSplits) {
  ThreadPool pool(3);
  for (int64_t n : {1, 5, 16, 17, 1000, 4099}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 16, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 16, 0);
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, RunCallsEverySlotOncePerRegion) {
  ThreadPool pool(2);
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> mask{0};
    pool.run([&](int i, int n) {
      EXPECT_EQ(n, 2);
      mask |= 1 << i;
    });
    EXPECT_EQ(mask.load(), 3);
  }
}

TEST(ThreadPool, RunNeverRunsOneSlotTwiceAtOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> busy(4);
  std::atomic<int> overlaps{0}, calls{0};
  for (int round = 0; round < 500; ++round)
    pool.run([&](int slot, int) {
      if (busy[size_t(slot)].exchange(1) != 0) overlaps++;
      calls++;
      busy[size_t(slot)].store(0);
    });
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(calls.load(), 500 * 4);
}

// Workers that arrive late (more threads than this machine has cores) must
// neither run an item twice nor an item of a region that has already ended.
TEST(ThreadPool, ManyShortRegionsEachCoverTheirIndicesOnce) {
  ThreadPool pool(5);
  std::mt19937 rng(std::random_device{}());
  std::vector<std::atomic<int>> hits(300);
  for (int round = 0; round < 2000; ++round) {
    const int64_t n = 1 + int64_t(rng() % hits.size());
    for (auto& h : hits) h.store(0);
    pool.parallel_for(n, 1 + int64_t(rng() % 4), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
    });
    for (int64_t i = 0; i < int64_t(hits.size()); ++i) ASSERT_EQ(hits[size_t(i)].load(), i < n ? 1 : 0) << "round " << round;
  }
}

// A thread held inside one chunk (a busy core, a descheduled vCPU) must not
// hold back what would have been its share under a static split (half, with
// two threads): the first chunk to start is a small part of the range, and it
// waits until every other chunk is done.
TEST(ThreadPool, AStuckThreadsShareIsTakenByTheOthers) {
  ThreadPool pool(2);
  const int64_t n = 64;
  std::atomic<int64_t> done_elsewhere{0};
  std::atomic<bool> first{true}, saw_all{false};
  std::atomic<int64_t> stuck_size{0};
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
    if (first.exchange(false)) {
      stuck_size = e - b;
      const int64_t others = n - (e - b);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (done_elsewhere.load() < others && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      saw_all = done_elsewhere.load() == others;
      return;
    }
    done_elsewhere += e - b;
  });
  EXPECT_LE(stuck_size.load(), n / 4);
  EXPECT_TRUE(saw_all.load());
}

TEST(ThreadPool, RejectsZeroThreads) { EXPECT_THROW(ThreadPool(0), std::exception); }

}  // namespace
}  // namespace fathom
