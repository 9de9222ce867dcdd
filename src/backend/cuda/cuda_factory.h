#pragma once
// The one entry point into the CUDA backend that host-only code may include.
#include <memory>

#include "backend/backend.h"

namespace fathom {

// The backend on CUDA device `device`; an error naming the cause when no such
// device is usable (no driver, no GPU, an index out of range).
std::shared_ptr<Backend> make_cuda_backend(int device);
// The device memory free on CUDA device `device` (cudaMemGetInfo), with this
// process's context on it; errors as make_cuda_backend's.
int64_t cuda_free_bytes(int device);

}  // namespace fathom
