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
#include <cuda_runtime.h>

namespace fathom::cuda {

__device__ __forceinline__ void await_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // The next kernel's blocks may now be placed where room is left, to wait
  // in their turn (or to start on what they read before waiting).
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace fathom::cuda
