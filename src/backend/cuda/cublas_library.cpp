#include "backend/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>

#include "core/error.h"

namespace fathom::cuda {

namespace {

template <typename Fn>
void resolve(void* library, const char* library_name, const char* symbol, Fn& out) {
  void* address = dlsym(library, symbol);
  if (!address) fail("cuda: ", library_name, " has no ", symbol, " (a cuBLAS other than the one built against?)");
  out = reinterpret_cast<Fn>(address);
}

CublasLibrary load() {
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  // Never unloaded: handles made from it live until the process ends. The
  // loader's search path first, then the toolkit this was built against
  // (where a linked cuBLAS was found through the build's run path).
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) library = dlopen((std::string(FATHOM_CUBLAS_DIR) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    fail("cuda: cannot load ", name, " (", dlerror(), ") from the library path or ", FATHOM_CUBLAS_DIR,
         "; the CUDA backend needs cuBLAS ", CUBLAS_VER_MAJOR);
  CublasLibrary lib{};
  resolve(library, name.c_str(), "cublasCreate_v2", lib.create);
  resolve(library, name.c_str(), "cublasDestroy_v2", lib.destroy);
  resolve(library, name.c_str(), "cublasSetStream_v2", lib.set_stream);
  resolve(library, name.c_str(), "cublasSetMathMode", lib.set_math_mode);
  resolve(library, name.c_str(), "cublasSetWorkspace_v2", lib.set_workspace);
  resolve(library, name.c_str(), "cublasGemmEx", lib.gemm_ex);
  return lib;
}

}  // namespace

const CublasLibrary& cublas_library() {
  static const CublasLibrary library = load();
  return library;
}

}  // namespace fathom::cuda
