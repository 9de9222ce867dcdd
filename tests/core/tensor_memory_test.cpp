// The allocation accounting the memory contract is tested with, KV storage
// that commits memory only as it is written, and the process measures the
// server charges at start-up (threads to come, weights not read yet).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/process_memory.h"
#include "core/tensor.h"
#include "sanitized_build.h"
#include "test_util.h"

namespace fathom {
namespace {

TEST(TensorMemory, PeakFollowsAllocationsAndResets) {
  const int64_t before = allocated_bytes(Device::cpu);
  reset_allocation_peak(Device::cpu);
  {
    Tensor a = Tensor::empty({1 << 18}, DType::f32);  // 1 MiB
    Tensor b = Tensor::empty({1 << 16}, DType::f32);  // 256 KiB
    EXPECT_EQ(allocated_bytes(Device::cpu), before + (5 << 18));
  }
  EXPECT_EQ(allocated_bytes(Device::cpu), before);
  EXPECT_EQ(allocated_peak_bytes(Device::cpu), before + (5 << 18));
  reset_allocation_peak(Device::cpu);
  EXPECT_EQ(allocated_peak_bytes(Device::cpu), before);
}

TEST(TensorMemory, ReservedStorageIsCommittedAsItIsWritten) {
  const int64_t reserved = reserved_bytes(Device::cpu), allocated = allocated_bytes(Device::cpu);
  const int64_t rss0 = resident_bytes();
  {
    Tensor t = Tensor::reserve({64, 1 << 18}, DType::bf16);  // 32 MiB of address space
    EXPECT_EQ(reserved_bytes(Device::cpu), reserved + (int64_t(32) << 20));
    EXPECT_EQ(allocated_bytes(Device::cpu), allocated);
    EXPECT_LT(resident_bytes() - rss0, int64_t(1) << 20);  // nothing committed yet
    std::memset(t.raw(), 0x5a, size_t(4) << 20);           // the first 4 MiB
    const int64_t grown = resident_bytes() - rss0;
    EXPECT_GE(grown, int64_t(7) << 19);  // 3.5 MiB
    EXPECT_LE(grown, int64_t(8) << 20);  // not the whole reservation
  }
  EXPECT_EQ(reserved_bytes(Device::cpu), reserved);
}

// The server charges each of its threads this much before they exist (they
// start after it measures itself): it must cover what a thread makes resident.
TEST(ProcessMemory, AThreadIsChargedAtLeastWhatItMakesResident) {
  if (testing::kSanitizedBuild)
    GTEST_SKIP() << "skipped: a sanitizer's runtime gives each thread state of its own that a release build has not";
  constexpr int kThreads = 48;
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  int started = 0;
  const int64_t rss0 = resident_bytes();
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&] {
      std::unique_lock<std::mutex> lock(m);
      ++started;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return started == kThreads; });
  }
  const int64_t per_thread = (resident_bytes() - rss0) / kThreads;
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  EXPECT_GE(thread_resident_bytes(), per_thread) << "a thread made " << per_thread << " bytes resident";
  // and not by much more than the stack it allows for
  EXPECT_LE(thread_resident_bytes(), per_thread + (int64_t(96) << 10)) << "a thread made " << per_thread << " bytes resident";
}

// The server counts mapped weights not read yet as if they were resident.
TEST(ProcessMemory, MappedFilesAbsentBytesFollowWhatWasRead) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fathom-absent-" + std::to_string(std::random_device{}()) + ".mappedtest");
  constexpr size_t kBytes = size_t(8) << 20;
  {
    std::vector<char> data(kBytes);
    auto rng = testing::fresh_rng();
    for (auto& c : data) c = char(rng());
    std::ofstream(path, std::ios::binary).write(data.data(), std::streamsize(data.size()));
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* p = ::mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(mapped_files_absent_bytes(".mappedtest"), int64_t(kBytes));
  volatile char sink = 0;
  for (size_t at = 0; at < kBytes / 2; at += 4096) sink = sink + static_cast<const char*>(p)[at];
  const int64_t absent = mapped_files_absent_bytes(".mappedtest");
  // The first half is mapped in; the kernel may map a few pages past it.
  EXPECT_LE(absent, int64_t(kBytes / 2));
  EXPECT_GE(absent, int64_t(kBytes / 2) - (int64_t(1) << 20));
  EXPECT_EQ(mapped_files_absent_bytes(".no-such-suffix"), 0);
  ::munmap(p, kBytes);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fathom
