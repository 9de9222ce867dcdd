#pragma once
// The one entry point into the CUDA backend that host-only code may include.
#include <memory>

#include "backend/backend.h"

namespace fathom {

// The backend on CUDA device `device`; an error naming the cause when no such
// device is usable (no driver, no GPU, an index out of range).
std::shared_ptr<Backend> make_cuda_backend(int device);

}  // namespace fathom
