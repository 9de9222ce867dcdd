// The allocation accounting the memory contract is tested with, and KV
// storage that commits memory only as it is written.
#include <gtest/gtest.h>

#include <cstring>

#include "core/process_memory.h"
#include "core/tensor.h"

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

}  // namespace
}  // namespace fathom
