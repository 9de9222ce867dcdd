#pragma once
// Kernels that overlap the kernel before them on the stream (programmatic
// dependent launch, Hopper on). A decode step is a chain of ~300 kernels,
// most of them a few microseconds long: launched in the plain way, each
// starts only once the one before it has finished and its blocks are gone,
// and a GEMV's first bytes arrive microseconds after that. Launched as
// overlapping (CudaBackend::launch, where Context::overlap_kernels), a
// kernel's blocks may start while the one before it still runs; before
// reading anything an earlier kernel writes, or writing anything at all,
// each calls await_previous_kernel(), which returns once the kernels before
// it on the stream have finished and their writes are visible. What a
// kernel reads that no kernel writes (weights, scales) it may read before:
// the GEMVs start streaming their weights that way.
//
// Every __global__ function of this backend calls it (a test checks the
// sources): a kernel that did not could run before its inputs exist, and
// the kernels after it would no longer wait for the ones before it. Device
// code: for .cu files only.
//
// release_first lets the next kernel's blocks be placed before this one
// waits rather than after: a small kernel between two GEMVs that does so
// lets the second GEMV's blocks take the SMs the first one's leave and
// start streaming their weights during its tail, instead of after it and
// this kernel. Order is kept either way: the next kernel's wait returns
// only once this one has finished, and this one only after its own wait.
// Whether it pays depends on the GEMV that follows (Context::
// release_before_wait).
#include <cuda_runtime.h>

namespace fathom::cuda {

__device__ __forceinline__ void await_previous_kernel(bool release_first = false) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (release_first) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // The next kernel's blocks may now be placed where room is left, to wait
  // in their turn (or to start on what they read before waiting).
  if (!release_first) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace fathom::cuda
