// Every CUDA kernel of the backend may be launched to overlap the kernel
// before it (src/backend/cuda/kernel_overlap.h), so each must wait for that
// kernel before touching what it writes. A kernel that never called
// await_previous_kernel() could read its inputs before they exist; this
// reads the sources (CI builds them without a GPU to run on) and names any
// kernel whose body lacks the call.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The body of the function whose declaration starts at `at`: from its first
// '{' to the matching '}'.
std::string body_at(const std::string& src, size_t at) {
  const size_t open = src.find('{', at);
  if (open == std::string::npos) return {};
  int depth = 0;
  for (size_t i = open; i < src.size(); ++i) {
    if (src[i] == '{') ++depth;
    else if (src[i] == '}' && --depth == 0) return src.substr(open, i - open + 1);
  }
  return {};
}

TEST(CudaKernels, EveryKernelAwaitsTheKernelBeforeIt) {
  const std::filesystem::path dir = std::filesystem::path(FATHOM_SOURCE_DIR) / "src" / "backend" / "cuda";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int kernels = 0;
  std::vector<std::string> missing;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".cu") continue;
    const std::string src = read_file(entry.path());
    for (size_t at = src.find("__global__"); at != std::string::npos; at = src.find("__global__", at + 1)) {
      ++kernels;
      const std::string body = body_at(src, at);
      if (body.find("await_previous_kernel(") == std::string::npos) {
        const size_t line_end = src.find('{', at);
        missing.push_back(entry.path().filename().string() + ": " + src.substr(at, line_end - at));
      }
    }
  }
  EXPECT_GE(kernels, 30) << "the backend's kernels were not found in " << dir;
  for (const std::string& m : missing) ADD_FAILURE() << "no await_previous_kernel() in " << m;
}

}  // namespace
