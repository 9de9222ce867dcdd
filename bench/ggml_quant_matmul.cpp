// fathom's quantized matmuls against ggml's (the library under llama.cpp) on
// the same machine, in one process, interleaved: every matmul of a
// Qwen3-0.6B-shaped model (28 layers of q/k/v/o and gate/up/down, and the
// tied 151936-row output head), each layer with its own weights so that decode
// streams them from memory as a real step does.
//   decode:  one row of x through every matmul (what a decode step multiplies)
//   prefill: 512 rows through one layer's matmuls (GFLOP/s)
// Arguments: threads, rounds, formats (a comma list of q8, q4, bf16).
// fathom q8 (groups of 64) against ggml Q8_0 (blocks of 32), fathom q4 (g64)
// against Q4_0 (blocks of 32, the same 4.5 bits a weight), and bf16 against
// BF16. ggml multiplies int8-quantized activations (Q8_0 x); fathom multiplies
// bf16 x by the exact codes. ggml is built as llama.cpp builds it (llamafile's
// sgemm on, weights repacked where its CPU backend repacks them). Built and
// run by bench/compare_ggml_quant.sh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/affine_weights.h"
#include "backend/backend.h"
#include "core/thread_pool.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace {

struct Shape {
  int64_t n, k;
};
const Shape kLayer[] = {{2048, 1024}, {1024, 1024}, {1024, 1024}, {1024, 2048},
                        {3072, 1024}, {3072, 1024}, {1024, 3072}};
constexpr int kLayers = 28;
constexpr Shape kHead{151936, 1024};

std::vector<float> random_floats(int64_t n, std::mt19937_64& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --- fathom ---
struct FathomSide {
  std::vector<fathom::Tensor> weights;  // every layer's matmuls, then the head
  std::shared_ptr<fathom::Backend> backend = fathom::make_cpu_backend();
};

FathomSide fathom_side(const std::vector<std::vector<float>>& w, const std::vector<Shape>& shapes, int bits) {
  FathomSide s;
  for (size_t i = 0; i < w.size(); ++i) {
    fathom::Tensor f = fathom::Tensor::empty({shapes[i].n, shapes[i].k}, fathom::DType::bf16);
    for (int64_t j = 0; j < f.numel(); ++j) f.data<fathom::bf16_t>()[j] = fathom::f32_to_bf16(w[i][size_t(j)]);
    s.weights.push_back(bits ? fathom::quantize_affine(f, bits, 64, fathom::DType::bf16) : f);
  }
  return s;
}

double fathom_run(FathomSide& s, const std::vector<Shape>& shapes, int64_t m, size_t first, size_t count) {
  std::mt19937_64 rng(1);
  std::vector<fathom::Tensor> xs, ys;
  for (size_t i = first; i < first + count; ++i) {
    fathom::Tensor x = fathom::Tensor::empty({m, shapes[i].k}, fathom::DType::f32);
    const auto v = random_floats(x.numel(), rng, 1.0f);
    std::copy(v.begin(), v.end(), x.data<float>());
    xs.push_back(x);
    ys.push_back(fathom::Tensor::empty({m, shapes[i].n}, fathom::DType::f32));
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < count; ++i) s.backend->matmul(xs[i], s.weights[first + i], nullptr, ys[i], /*bf16_inputs=*/true);
  return seconds_since(t0);
}

// --- ggml, placed and run as llama.cpp does on x86: Q4_0 weights in the CPU
// backend's repack buffer (converted at load to interleaved Q4_0_8x8), the
// others in plain host buffers; one persistent thread pool ---
struct GgmlSide {
  ggml_context* ctx = nullptr;
  ggml_backend_buffer_t buffer = nullptr;
  std::vector<ggml_tensor*> weights;
  ggml_backend_t backend = nullptr;
  ggml_threadpool* pool = nullptr;
};

// llama.cpp's loader tries the CPU backend's extra buffer types in order: AMX
// (built with AMX-INT8, on a processor that has it) takes Q8_0 and Q4_0, the
// repack buffer Q4_0; BF16 stays in a plain buffer.
ggml_backend_buffer_type_t weight_buffer_type(ggml_backend_t backend, ggml_type type) {
  if (type == GGML_TYPE_BF16) return ggml_backend_cpu_buffer_type();
  ggml_backend_dev_t dev = ggml_backend_get_device(backend);
  auto extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
  for (ggml_backend_buffer_type_t* b = extra ? extra(dev) : nullptr; b && *b; ++b) {
    const std::string name = ggml_backend_buft_name(*b);
    if (name.find("AMX") != std::string::npos) return *b;
    if (type == GGML_TYPE_Q4_0 && name.find("REPACK") != std::string::npos) return *b;
  }
  return ggml_backend_cpu_buffer_type();
}

GgmlSide ggml_side(const std::vector<std::vector<float>>& w, const std::vector<Shape>& shapes, ggml_type type,
                   int threads) {
  GgmlSide s;
  s.backend = ggml_backend_cpu_init();
  ggml_threadpool_params p = ggml_threadpool_params_default(threads);
  s.pool = ggml_threadpool_new(&p);
  ggml_backend_cpu_set_n_threads(s.backend, threads);
  ggml_backend_cpu_set_threadpool(s.backend, s.pool);
  s.ctx = ggml_init({ggml_tensor_overhead() * (w.size() + 8), nullptr, /*no_alloc=*/true});
  for (size_t i = 0; i < w.size(); ++i) s.weights.push_back(ggml_new_tensor_2d(s.ctx, type, shapes[i].k, shapes[i].n));
  ggml_backend_buffer_type_t buft = weight_buffer_type(s.backend, type);
  s.buffer = ggml_backend_alloc_ctx_tensors_from_buft(s.ctx, buft);
  std::printf("(ggml %s weights in %s)\n", ggml_type_name(type), ggml_backend_buft_name(buft));
  for (size_t i = 0; i < w.size(); ++i) {
    std::vector<uint8_t> host(ggml_nbytes(s.weights[i]));
    if (type == GGML_TYPE_BF16)
      ggml_fp32_to_bf16_row(w[i].data(), reinterpret_cast<ggml_bf16_t*>(host.data()), int64_t(w[i].size()));
    else
      ggml_quantize_chunk(type, w[i].data(), host.data(), 0, shapes[i].n, shapes[i].k, nullptr);
    ggml_backend_tensor_set(s.weights[i], host.data(), 0, host.size());
  }
  return s;
}

double ggml_run(GgmlSide& s, const std::vector<Shape>& shapes, int64_t m, size_t first, size_t count) {
  std::mt19937_64 rng(1);
  size_t bytes = size_t(64) << 20;
  for (size_t i = first; i < first + count; ++i) bytes += size_t(m * (shapes[i].k + shapes[i].n)) * 4 + 4096;
  ggml_context* ctx = ggml_init({bytes + ggml_graph_overhead_custom(8192, false), nullptr, false});
  ggml_cgraph* gf = ggml_new_graph_custom(ctx, 8192, false);
  for (size_t i = first; i < first + count; ++i) {
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, shapes[i].k, m);
    const auto v = random_floats(shapes[i].k * m, rng, 1.0f);
    std::copy(v.begin(), v.end(), static_cast<float*>(x->data));
    ggml_build_forward_expand(gf, ggml_mul_mat(ctx, s.weights[i], x));
  }
  const auto t0 = std::chrono::steady_clock::now();
  ggml_backend_graph_compute(s.backend, gf);
  const double t = seconds_since(t0);
  ggml_free(ctx);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::stoi(argv[1]) : 1;
  const int rounds = argc > 2 ? std::stoi(argv[2]) : 5;
  const std::string formats = argc > 3 ? argv[3] : "q8,q4,bf16";  // which of the three to run
  fathom::ThreadPool::set_global_threads(threads);
  std::vector<Shape> shapes;
  for (int l = 0; l < kLayers; ++l)
    for (const Shape& s : kLayer) shapes.push_back(s);
  shapes.push_back(kHead);
  std::mt19937_64 rng(42);
  std::vector<std::vector<float>> w;
  for (const Shape& s : shapes) w.push_back(random_floats(s.n * s.k, rng, 0.02f));
  ggml_cpu_init();

  struct Pair {
    const char* name;
    int bits;
    ggml_type type;
  };
  std::printf("| threads | format (fathom / ggml) | decode matmuls ms: fathom | ggml | ratio | prefill 512 GFLOP/s: fathom | ggml | ratio |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Pair& p : {Pair{"q8 g64 / Q8_0", 8, GGML_TYPE_Q8_0}, Pair{"q4 g64 / Q4_0", 4, GGML_TYPE_Q4_0},
                        Pair{"bf16 / BF16", 0, GGML_TYPE_BF16}}) {
    const std::string key = p.bits ? "q" + std::to_string(p.bits) : "bf16";
    if (("," + formats + ",").find("," + key + ",") == std::string::npos) continue;
    FathomSide f = fathom_side(w, shapes, p.bits);
    GgmlSide g = ggml_side(w, shapes, p.type, threads);
    std::vector<double> fd, gd, fp, gp;
    const size_t all = shapes.size(), layer = sizeof(kLayer) / sizeof(kLayer[0]);
    double flops = 0;
    for (size_t i = 0; i < layer; ++i) flops += 2.0 * 512 * double(shapes[i].n * shapes[i].k);
    for (int r = 0; r < rounds + 1; ++r) {  // the first round warms up (page faults, pools)
      // Each library runs a few passes back to back, then rests before the
      // other: a library's threads spin a while after their work, and on a
      // small machine the other's would compete with them.
      auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
      auto best_of = [](int passes, auto&& run) {
        double best = 1e30;
        for (int i = 0; i < passes; ++i) best = std::min(best, run());
        return best;
      };
      const double a = best_of(3, [&] { return fathom_run(f, shapes, 1, 0, all); });
      pause();
      const double b = best_of(3, [&] { return ggml_run(g, shapes, 1, 0, all); });
      pause();
      const double c = best_of(3, [&] { return fathom_run(f, shapes, 512, 0, layer); });
      pause();
      const double d = best_of(3, [&] { return ggml_run(g, shapes, 512, 0, layer); });
      pause();
      if (r == 0) continue;
      fd.push_back(a), gd.push_back(b), fp.push_back(flops / c / 1e9), gp.push_back(flops / d / 1e9);
    }
    std::printf("| %d | %s | %.2f | %.2f | %.2fx | %.0f | %.0f | %.2fx |\n", threads, p.name, median(fd) * 1e3,
                median(gd) * 1e3, median(gd) / median(fd), median(fp), median(gp), median(fp) / median(gp));
    ggml_backend_buffer_free(g.buffer);
    ggml_backend_free(g.backend);
    ggml_threadpool_free(g.pool);
    ggml_free(g.ctx);
  }
  return 0;
}
