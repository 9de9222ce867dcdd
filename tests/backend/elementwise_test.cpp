// Norms, RoPE, SwiGLU and embedding against direct formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/kernels.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;

TEST(Elementwise, RmsNormMatchesFormula) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  Tensor x = random_tensor({5, 48}, DType::f32, rng, 3.0f);
  Tensor w = random_tensor({48}, DType::f32, rng);
  Tensor y = Tensor::empty({5, 48}, DType::f32);
  backend->rms_norm(x, w, 1e-5f, y);
  for (int r = 0; r < 5; ++r) {
    double ss = 0;
    for (int i = 0; i < 48; ++i) ss += double(x.data<float>()[r * 48 + i]) * x.data<float>()[r * 48 + i];
    const double inv = 1.0 / std::sqrt(ss / 48 + 1e-5);
    for (int i = 0; i < 48; ++i)
      EXPECT_NEAR(y.data<float>()[r * 48 + i], w.data<float>()[i] * x.data<float>()[r * 48 + i] * inv, 1e-5);
  }
}

TEST(Elementwise, RopeRotatesPairsAndKeepsTheRestUntouched) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  const int64_t t = 3, heads = 2, head_dim = 12, half = 4;  // partial rotary: 8 of 12 dims
  Tensor x = random_tensor({t, heads, head_dim}, DType::f32, rng);
  Tensor before = Tensor::empty(x.shape(), DType::f32);
  std::copy(x.data<float>(), x.data<float>() + x.numel(), before.data<float>());
  Tensor cos = Tensor::empty({t, half}, DType::f32), sin = Tensor::empty({t, half}, DType::f32);
  std::uniform_real_distribution<float> angle(-3.0f, 3.0f);
  for (int64_t i = 0; i < t * half; ++i) {
    const float a = angle(rng);
    cos.data<float>()[i] = std::cos(a);
    sin.data<float>()[i] = std::sin(a);
  }
  backend->rope(x, cos, sin);
  for (int64_t p = 0; p < t; ++p)
    for (int64_t h = 0; h < heads; ++h) {
      const float* b = before.data<float>() + (p * heads + h) * head_dim;
      const float* a = x.data<float>() + (p * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float c = cos.data<float>()[p * half + i], s = sin.data<float>()[p * half + i];
        EXPECT_NEAR(a[i], b[i] * c - b[i + half] * s, 1e-6);
        EXPECT_NEAR(a[i + half], b[i + half] * c + b[i] * s, 1e-6);
      }
      for (int64_t i = 2 * half; i < head_dim; ++i) EXPECT_EQ(a[i], b[i]);
    }
}

TEST(Elementwise, FastSiluMulMatchesReference) {
  auto rng = fresh_rng();
  const int64_t n = 1000 + 7;  // a tail past the last whole vector
  Tensor gate = random_tensor({n}, DType::f32, rng, 8.0f), up = random_tensor({n}, DType::f32, rng);
  gate.data<float>()[0] = -120.0f;  // below the fast exp's clamp
  gate.data<float>()[1] = 0.0f;
  std::vector<float> fast(static_cast<size_t>(n)), ref(fast.size());
  cpu::kernels_for(cpu::detect_isa()).silu_mul(gate.data<float>(), up.data<float>(), fast.data(), 3, n);
  cpu::silu_mul_range(gate.data<float>(), up.data<float>(), ref.data(), 3, n);
  cpu::kernels_for(cpu::detect_isa()).silu_mul(gate.data<float>(), up.data<float>(), fast.data(), 0, 3);
  cpu::silu_mul_range(gate.data<float>(), up.data<float>(), ref.data(), 0, 3);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(fast[i], ref[i], 1e-6f * std::max(1.0f, std::abs(ref[i]))) << i;
}

TEST(Elementwise, FastGeluTanhMulMatchesReference) {
  auto rng = fresh_rng();
  const int64_t n = 1000 + 9;
  Tensor gate = random_tensor({n}, DType::f32, rng, 4.0f), up = random_tensor({n}, DType::f32, rng);
  gate.data<float>()[0] = -60.0f;  // tanh saturates: the product is -0
  gate.data<float>()[1] = 0.0f;
  gate.data<float>()[2] = 30.0f;
  std::vector<float> fast(static_cast<size_t>(n)), ref(fast.size());
  const auto k = cpu::kernels_for(cpu::detect_isa());
  k.gelu_tanh_mul(gate.data<float>(), up.data<float>(), fast.data(), 0, n);
  cpu::gelu_tanh_mul_range(gate.data<float>(), up.data<float>(), ref.data(), 0, n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(fast[i], ref[i], 2e-6f * std::max(1.0f, std::abs(ref[i]))) << i;
}

TEST(Elementwise, SiluMulAndAdd) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  Tensor g = random_tensor({3, 70}, DType::f32, rng, 4.0f), u = random_tensor({3, 70}, DType::f32, rng);
  Tensor out = Tensor::empty({3, 70}, DType::f32);
  backend->silu_mul(g, u, out);
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double gv = g.data<float>()[i];
    EXPECT_NEAR(out.data<float>()[i], gv / (1 + std::exp(-gv)) * u.data<float>()[i], 1e-5);
  }
  Tensor sum = Tensor::empty({3, 70}, DType::f32);
  std::copy(g.data<float>(), g.data<float>() + g.numel(), sum.data<float>());
  backend->add_inplace(sum, u);
  for (int64_t i = 0; i < g.numel(); ++i) EXPECT_FLOAT_EQ(sum.data<float>()[i], g.data<float>()[i] + u.data<float>()[i]);
}

TEST(Elementwise, GeluTanhMulMatchesFormula) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  Tensor g = random_tensor({4, 333}, DType::f32, rng, 5.0f), u = random_tensor({4, 333}, DType::f32, rng);
  Tensor out = Tensor::empty({4, 333}, DType::f32);
  backend->gelu_tanh_mul(g, u, out);
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double x = g.data<float>()[i];
    const double gelu = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(out.data<float>()[i], gelu * u.data<float>()[i], 1e-5 * (1.0 + std::abs(gelu)));
  }
  Tensor bad = Tensor::empty({4, 332}, DType::f32);
  EXPECT_THROW(backend->gelu_tanh_mul(g, bad, out), Error);
}

TEST(Elementwise, EmbeddingWidensRowsAndRejectsBadIds) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  Tensor table = random_tensor({10, 6}, DType::bf16, rng);
  Tensor out = Tensor::empty({2, 6}, DType::f32);
  backend->embedding(table, {7, 2}, out);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(out.data<float>()[i], bf16_to_f32(table.data<bf16_t>()[7 * 6 + i]));
    EXPECT_EQ(out.data<float>()[6 + i], bf16_to_f32(table.data<bf16_t>()[2 * 6 + i]));
  }
  EXPECT_THROW(backend->embedding(table, {10, 0}, out), Error);
  EXPECT_THROW(backend->embedding(table, {-1, 0}, out), Error);
}

TEST(DType, Bf16AndF16Conversions) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.00390625f), f32_to_bf16(1.0f));  // ties to even
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
}

}  // namespace
}  // namespace fathom
