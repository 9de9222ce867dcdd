// cuBLAS is opened by the CUDA backend when it is first made, not linked:
// a process that never asks for a GPU never maps it (libcublasLt's
// constructors cost ~0.4 s and ~200 MB resident), and the entry points the
// backend calls resolve from the library. Needs no GPU.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#ifdef FATHOM_WITH_CUDA
#include "backend/cuda/cublas_library.h"
#endif

namespace fathom {
namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(library) != std::string::npos) return true;
  return false;
}

// Read while the program starts (every library it links is mapped by then),
// before any test could have opened cuBLAS.
const bool kCublasMappedAtStart = mapped("libcublas");

TEST(CublasLibrary, NotMappedUntilABackendAsksForIt) {
  EXPECT_FALSE(kCublasMappedAtStart) << "a library linked with the tests maps cuBLAS at start-up";
}

#ifdef FATHOM_WITH_CUDA
TEST(CublasLibrary, ResolvesEveryEntryPointTheBackendCalls) {
  const cuda::CublasLibrary& lib = cuda::cublas_library();
  EXPECT_NE(lib.create, nullptr);
  EXPECT_NE(lib.destroy, nullptr);
  EXPECT_NE(lib.set_stream, nullptr);
  EXPECT_NE(lib.set_math_mode, nullptr);
  EXPECT_NE(lib.set_workspace, nullptr);
  EXPECT_NE(lib.gemm_ex, nullptr);
  EXPECT_TRUE(mapped("libcublas"));
  EXPECT_EQ(&cuda::cublas_library(), &lib) << "opened once";
}
#endif

}  // namespace
}  // namespace fathom
