#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

TEST(ThreadPool, RunGivesEachThreadItsIndexRepeatedly) {
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

TEST(ThreadPool, RejectsZeroThreads) { EXPECT_THROW(ThreadPool(0), std::exception); }

}  // namespace
}  // namespace fathom
