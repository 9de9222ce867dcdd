#pragma once
// Async copies, global to shared memory (cp.async, Ampere on): 16 bytes a
// thread, none past src_bytes (the rest of the 16 filled with zeros), in
// groups committed and awaited in order. The copies take no registers while
// in flight. Device code: for .cu files only.
#include <cstdint>

namespace fathom::cuda {

__device__ __forceinline__ void copy_async16(void* dst, const void* src, int src_bytes) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;"); }
// Waits until at most Pending of this thread's committed groups are in flight.
template <int Pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

}  // namespace fathom::cuda
