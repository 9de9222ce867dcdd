// Every matmul kernel the processor can run against the plain reference, on
// random shapes that hit the K, M and N tails and the K blocking.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "test_util.h"

namespace fathom {
namespace cpu {
void matmul_slice_amx_emulated(const MatmulArgs& a, int64_t n0, int64_t n1);  // amx_emulated_tiles.cpp
}
namespace {

using testing::fresh_rng;
using testing::random_tensor;
using testing::relative_error;

struct Shape {
  int64_t m, k, n;
};

std::vector<cpu::Isa> runnable_isas() {
  std::vector<cpu::Isa> isas = {cpu::Isa::portable};
  const cpu::Isa best = cpu::detect_isa();
  if (best == cpu::Isa::avx2 || best == cpu::Isa::avx512) isas.push_back(cpu::Isa::avx2);
  if (best == cpu::Isa::avx512) isas.push_back(cpu::Isa::avx512);
  return isas;
}

void run_case(cpu::MatmulSlice slice, const char* kernel, const Shape& s, DType w_dtype, bool bf16_inputs,
              std::mt19937_64& rng) {
  Tensor x = random_tensor({s.m, s.k}, DType::f32, rng);
  Tensor w = random_tensor({s.n, s.k}, w_dtype, rng, 0.2f);
  Tensor bias = random_tensor({s.n}, DType::f32, rng);
  std::vector<float> xr(static_cast<size_t>(s.m * s.k));
  std::vector<bf16_t> xb(static_cast<size_t>(s.m * s.k));
  for (size_t i = 0; i < xr.size(); ++i) {
    xb[i] = f32_to_bf16(x.data<float>()[i]);
    xr[i] = bf16_inputs ? bf16_to_f32(xb[i]) : x.data<float>()[i];
  }
  cpu::MatmulArgs a;
  a.x = xr.data();
  a.xb = bf16_inputs ? xb.data() : nullptr;
  a.w = w.raw();
  a.w_dtype = w_dtype;
  a.bias = bias.data<float>();
  a.M = s.m, a.N = s.n, a.K = s.k;
  std::vector<float> fast(static_cast<size_t>(s.m * s.n), 7.0f), ref(size_t(s.m * s.n), -7.0f);
  a.y = fast.data();
  // Two slices, as two threads would split N.
  const int64_t split = s.n / 2 / 16 * 16;
  slice(a, 0, split);
  slice(a, split, s.n);
  a.y = ref.data();
  cpu::matmul_slice_reference(a, 0, s.n);
  EXPECT_LT(relative_error(fast.data(), ref.data(), s.m * s.n), 5e-6)
      << kernel << " m=" << s.m << " k=" << s.k << " n=" << s.n << " w=" << dtype_name(w_dtype)
      << " bf16_inputs=" << bf16_inputs;
}

TEST(Matmul, FastKernelsMatchReference) {
  auto rng = fresh_rng();
  // M = 1 is decode's row walk: {1, 1063, 23} has unrolled steps, single
  // vectors, a scalar K tail and a slice of rows that is not a multiple of 4.
  const Shape shapes[] = {{1, 64, 48}, {1, 40, 5}, {1, 1063, 23}, {1, 3072, 9}, {2, 64, 20}, {6, 48, 9}, {3, 96, 33}, {4, 128, 16}, {5, 600, 37}, {70, 1040, 20}, {9, 7, 3},
                          {16, 64, 16}, {23, 600, 100}, {47, 1040, 150}, {17, 63, 40}, {130, 512, 200}};
  for (cpu::Isa isa : runnable_isas())
    for (const Shape& s : shapes)
      for (DType w : {DType::f32, DType::bf16})
        for (bool bf16_inputs : {false, true})
          run_case(cpu::kernels_for(isa).matmul, cpu::isa_name(isa), s, w, bf16_inputs, rng);
}

// Rows 16–530 (16: the GEMV's, as a decode-sized step; whole tile blocks of
// 32, a lone block of 16 and a row the GEMV takes, past the 512-row block),
// K across the 512 block and not a multiple of 32 (the AVX-512 kernel takes
// it), columns split at a multiple of 16 with a tail of a few.
const Shape kAmxShapes[] = {{16, 32, 16}, {17, 64, 40}, {32, 544, 64}, {33, 1056, 100}, {48, 96, 32},
                            {100, 512, 70}, {64, 48, 48}, {40, 1088, 36}, {530, 64, 32}};

void run_amx_cases(cpu::MatmulSlice slice, const char* kernel) {
  auto rng = fresh_rng();
  for (const Shape& s : kAmxShapes)
    for (DType w : {DType::f32, DType::bf16})
      for (bool bf16_inputs : {false, true}) run_case(slice, kernel, s, w, bf16_inputs, rng);
}

TEST(Matmul, AmxTilesMatchReference) {
  if (!cpu::amx_bf16_available()) GTEST_SKIP() << "skipped: no AMX (this processor or kernel has no AMX-BF16 tiles)";
  run_amx_cases(cpu::matmul_slice_amx, "amx");
}

TEST(Matmul, AmxKernelWithEmulatedTilesMatchesReference) {
  if (cpu::detect_isa() != cpu::Isa::avx512) GTEST_SKIP() << "skipped: no AVX-512 (the AMX kernel's edges need it)";
  run_amx_cases(cpu::matmul_slice_amx_emulated, "amx (emulated tiles)");
}

TEST(GemmNn, FastKernelsMatchReference) {
  auto rng = fresh_rng();
  const Shape shapes[] = {{1, 5, 128}, {2, 40, 70}, {16, 70, 64}, {7, 33, 24}, {4, 1, 200}, {3, 9, 5}};
  for (cpu::Isa isa : runnable_isas())
    for (const Shape& s : shapes)
      for (DType w_dtype : {DType::f32, DType::bf16}) {
        const int64_t ldw = s.n + 3;  // rows of w further apart than N
        Tensor x = random_tensor({s.m, s.k}, DType::f32, rng);
        Tensor w = random_tensor({s.k, ldw}, w_dtype, rng);
        std::vector<float> fast(static_cast<size_t>(s.m * s.n)), ref(static_cast<size_t>(s.m * s.n));
        cpu::kernels_for(isa).gemm_nn(x.data<float>(), s.k, w.raw(), w_dtype, ldw, s.m, s.k, s.n, fast.data(), s.n);
        cpu::gemm_nn_reference(x.data<float>(), s.k, w.raw(), w_dtype, ldw, s.m, s.k, s.n, ref.data(), s.n);
        EXPECT_LT(relative_error(fast.data(), ref.data(), s.m * s.n), 5e-6)
            << cpu::isa_name(isa) << " m=" << s.m << " k=" << s.k << " n=" << s.n;
      }
}

TEST(ToBf16, FastConversionRoundsLikeTheReference) {
  auto rng = fresh_rng();
  Tensor x = random_tensor({1000}, DType::f32, rng, 100.0f);
  x.data<float>()[3] = 1.00390625f;  // a tie: rounds to even
  std::vector<bf16_t> fast(1000), ref(1000);
  for (cpu::Isa isa : runnable_isas()) {
    cpu::kernels_for(isa).to_bf16(x.data<float>(), 1000, fast.data());
    cpu::to_bf16_reference(x.data<float>(), 1000, ref.data());
    EXPECT_EQ(fast, ref) << cpu::isa_name(isa);
  }
}

TEST(Matmul, SharedInputEqualsSeparateMatmuls) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  for (int64_t m : {1, 9}) {
    Tensor x = random_tensor({m, 64}, DType::f32, rng);
    Tensor w1 = random_tensor({48, 64}, DType::bf16, rng), w2 = random_tensor({20, 64}, DType::bf16, rng);
    Tensor bias = random_tensor({20}, DType::f32, rng);
    Tensor y1 = Tensor::empty({m, 48}, DType::f32), y2 = Tensor::empty({m, 20}, DType::f32);
    Tensor e1 = Tensor::empty({m, 48}, DType::f32), e2 = Tensor::empty({m, 20}, DType::f32);
    for (bool bf16 : {false, true}) {
      const Backend::MatmulTarget targets[] = {{&w1, nullptr, &y1}, {&w2, &bias, &y2}};
      backend->matmul_shared(x, targets, bf16);
      backend->matmul(x, w1, nullptr, e1, bf16);
      backend->matmul(x, w2, &bias, e2, bf16);
      EXPECT_EQ(0, std::memcmp(y1.raw(), e1.raw(), e1.nbytes()));
      EXPECT_EQ(0, std::memcmp(y2.raw(), e2.raw(), e2.nbytes()));
    }
  }
  Tensor x = random_tensor({2, 64}, DType::f32, rng), w = random_tensor({8, 32}, DType::f32, rng);
  Tensor y = Tensor::empty({2, 8}, DType::f32);
  const Backend::MatmulTarget bad[] = {{&w, nullptr, &y}};
  EXPECT_THROW(backend->matmul_shared(x, bad), Error);
}

// Steps of up to 16 rows (decode, speculative verify, small batches) give
// every row exactly the bits it gets alone, whichever rows share the step.
TEST(Matmul, SmallStepsAreBatchInvariant) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  for (const DType wdt : {DType::f32, DType::bf16})
    for (bool bf16 : {false, true})
      for (int64_t m = 1; m <= 16; ++m) {
        // Tails in N; in K for odd m, and whole 32-value steps for even m
        // (where an AMX machine's tiles would take K, 16 rows included).
        const int64_t k = m % 2 ? 200 + int64_t(rng() % 100) : 32 * (7 + int64_t(rng() % 3));
        const int64_t n = 13 + int64_t(rng() % 40);
        Tensor x = random_tensor({m, k}, DType::f32, rng);
        Tensor w = random_tensor({n, k}, wdt, rng, 0.1f), bias = random_tensor({n}, DType::f32, rng);
        Tensor y = Tensor::empty({m, n}, DType::f32), one = Tensor::empty({1, n}, DType::f32);
        backend->matmul(x, w, &bias, y, bf16);
        for (int64_t r = 0; r < m; ++r) {
          backend->matmul(x.slice_rows(r, r + 1), w, &bias, one, bf16);
          EXPECT_EQ(0, std::memcmp(one.raw(), y.slice_rows(r, r + 1).raw(), one.nbytes()))
              << "row " << r << " of " << m << ", weights " << dtype_name(wdt) << ", bf16 compute " << bf16;
        }
      }
}

TEST(Matmul, BackendChecksShapes) {
  auto backend = make_cpu_backend();
  auto rng = fresh_rng();
  Tensor x = random_tensor({2, 8}, DType::f32, rng);
  Tensor w = random_tensor({4, 9}, DType::f32, rng);
  Tensor y = Tensor::empty({2, 4}, DType::f32);
  EXPECT_THROW(backend->matmul(x, w, nullptr, y), Error);
}

TEST(Matmul, BackendMatchesReferenceAcrossThreads) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  for (const Shape s : {Shape{1, 256, 300}, Shape{37, 320, 129}}) {
    Tensor x = random_tensor({s.m, s.k}, DType::f32, rng);
    Tensor w = random_tensor({s.n, s.k}, DType::bf16, rng, 0.1f);
    Tensor y = Tensor::empty({s.m, s.n}, DType::f32);
    backend->matmul(x, w, nullptr, y);
    std::vector<float> ref(static_cast<size_t>(s.m * s.n));
    cpu::MatmulArgs a;
    a.x = x.data<float>();
    a.w = w.raw();
    a.w_dtype = DType::bf16;
    a.y = ref.data();
    a.M = s.m, a.N = s.n, a.K = s.k;
    cpu::matmul_slice_reference(a, 0, s.n);
    EXPECT_LT(relative_error(y.data<float>(), ref.data(), s.m * s.n), 2e-6);
  }
}

}  // namespace
}  // namespace fathom
