// The prefill matmul kernels on their own: GFLOP/s of y = x · wᵀ for large
// square bf16 GEMMs (and a prefill-shaped one), on the process's thread pool
// split as the CPU backend splits it. Each kernel the processor runs: the AMX
// tiles (where amx_bf16_available()) and the AVX-512 pair kernel; this is the
// ceiling to hold a model's prefill against.
// Built where Debian's libdnnl-dev is installed, oneDNN's bf16 matmul runs
// beside them on the same inputs (its own OpenMP threads, as many).
//   gemm_throughput [threads] [repeats]      (medians of `repeats`)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/thread_pool.h"

#ifdef FATHOM_BENCH_ONEDNN
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace {

using fathom::bf16_t;
using namespace fathom::cpu;

struct Kernel {
  const char* name;
  MatmulSlice slice;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

#ifdef FATHOM_BENCH_ONEDNN
// y[M, N] = x[M, K] · w[N, K]ᵀ through oneDNN: w given as [K, N] with
// strides (1, K), which is w's own layout; f32 out.
struct OneDnnMatmul {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul matmul;
  dnnl::memory x, w, y;
  OneDnnMatmul(const MatmulArgs& a) {
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc xd({a.M, a.K}, dt::bf16, dnnl::memory::dims{a.K, 1});
    const dnnl::memory::desc wd({a.K, a.N}, dt::bf16, dnnl::memory::dims{1, a.K});
    const dnnl::memory::desc yd({a.M, a.N}, dt::f32, dnnl::memory::dims{a.N, 1});
#if DNNL_VERSION_MAJOR >= 3
    matmul = dnnl::matmul(dnnl::matmul::primitive_desc(engine, xd, wd, yd));
#else
    matmul = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(xd, wd, yd), engine));
#endif
    x = dnnl::memory(xd, engine, const_cast<bf16_t*>(a.xb));
    w = dnnl::memory(wd, engine, const_cast<void*>(a.w));
    y = dnnl::memory(yd, engine, a.y);
  }
  void run() {
    matmul.execute(stream, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
    stream.wait();
  }
};
#endif

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::stoi(argv[1]) : 1;
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 5;
  fathom::ThreadPool::set_global_threads(threads);
#ifdef FATHOM_BENCH_ONEDNN
  omp_set_num_threads(threads);
#endif
  fathom::ThreadPool& pool = fathom::ThreadPool::global();
  std::vector<Kernel> kernels;
  if (amx_bf16_available()) kernels.push_back({"amx-bf16", matmul_slice_amx});
  if (detect_isa() == Isa::avx512) kernels.push_back({"avx512-bf16", matmul_slice_avx512});
  struct Size {
    int64_t m, n, k;
  };
  // Square GEMMs, and Qwen3-0.6B's gate/up projection at a 512-token prefill chunk.
  const Size sizes[] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {512, 3072, 1024}};
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Size& s : sizes) {
    std::vector<bf16_t> x(size_t(s.m * s.k)), w(size_t(s.n * s.k));
    for (auto& v : x) v = fathom::f32_to_bf16(normal(rng));
    for (auto& v : w) v = fathom::f32_to_bf16(0.05f * normal(rng));
    std::vector<float> y(size_t(s.m * s.n));
    MatmulArgs a;
    a.xb = x.data();
    a.w = w.data();
    a.w_dtype = fathom::DType::bf16;
    a.y = y.data();
    a.M = s.m, a.N = s.n, a.K = s.k;
    for (const Kernel& kernel : kernels) {
      std::vector<double> gflops;
      for (int r = 0; r < repeats + 1; ++r) {  // the first run warms the caches and pages
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(s.n, 32, [&](int64_t n0, int64_t n1) { kernel.slice(a, n0, n1); });
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) gflops.push_back(2.0 * double(s.m) * double(s.n) * double(s.k) / t / 1e9);
      }
      std::printf("{\"kernel\":\"%s\",\"threads\":%d,\"m\":%ld,\"n\":%ld,\"k\":%ld,\"gflops\":%.1f}\n", kernel.name,
                  threads, long(s.m), long(s.n), long(s.k), median(gflops));
    }
#ifdef FATHOM_BENCH_ONEDNN
    OneDnnMatmul onednn(a);
    std::vector<double> gflops;
    for (int r = 0; r < repeats + 1; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      onednn.run();
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) gflops.push_back(2.0 * double(s.m) * double(s.n) * double(s.k) / t / 1e9);
    }
    std::printf("{\"kernel\":\"onednn-%d.%d\",\"threads\":%d,\"m\":%ld,\"n\":%ld,\"k\":%ld,\"gflops\":%.1f}\n",
                dnnl_version()->major, dnnl_version()->minor, threads, long(s.m), long(s.n), long(s.k), median(gflops));
#endif
  }
  return 0;
}
