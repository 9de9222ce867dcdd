// MLX affine-quantized weights on the CPU: the packing and dequantization
// against an independent scalar formula, quantize_affine's error bound, and
// every matmul path (decode's packed GEMV, prefill's widened panels, through
// the backend) against the dequantize-then-multiply reference, for every bit
// width, group size and scale dtype, on fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend/affine_codec.h"
#include "backend/affine_weights.h"
#include "backend/cpu/kernels.h"
#include "test_util.h"

namespace fathom {
namespace cpu {
void quant_gemm_amx_emulated(const QuantMatmulArgs& a, const bf16_t* xb, int64_t n0, int64_t n1,
                             void* scratch);  // amx_emulated_tiles.cpp
}  // namespace cpu
namespace {

using testing::fresh_rng;
using testing::random_tensor;

constexpr int kBits[] = {2, 3, 4, 5, 6, 8};
constexpr int kGroups[] = {32, 64, 128};

// A random affine matrix built from known codes: codes[r * cols + i].
struct KnownAffine {
  Tensor w;
  std::vector<uint32_t> codes;
};

KnownAffine known_affine(int64_t rows, int64_t cols, int bits, int group, DType params, std::mt19937_64& rng) {
  KnownAffine k;
  Tensor packed = Tensor::empty({rows, cols * bits / 32}, DType::u32);
  std::fill_n(packed.data<uint32_t>(), packed.numel(), 0u);
  std::uniform_int_distribution<uint32_t> code(0, (1u << bits) - 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) {
      k.codes.push_back(code(rng));
      pack_code(packed.data<uint32_t>() + r * (cols * bits / 32), bits, i, k.codes.back());
    }
  AffineQuant q{bits, group, random_tensor({rows, cols / group}, params, rng, 0.05f),
                random_tensor({rows, cols / group}, params, rng, 0.3f)};
  k.w = Tensor::affine(packed, cols, std::move(q), "test");
  return k;
}

float param(const Tensor& t, int64_t i) { return cpu::param_at(t.raw(), t.dtype(), i); }

TEST(AffineWeights, DequantizationIsScaleTimesCodePlusBias) {
  auto rng = fresh_rng();
  for (int bits : kBits)
    for (int group : kGroups)
      for (DType params : {DType::bf16, DType::f16, DType::f32}) {
        const int64_t rows = 3, cols = 256;
        const KnownAffine k = known_affine(rows, cols, bits, group, params, rng);
        const Tensor f = dequantize_affine(k.w);
        const AffineQuant& q = k.w.affine_quant();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < cols; ++i) {
            const int64_t g = r * (cols / group) + i / group;
            const float want = std::fma(float(k.codes[size_t(r * cols + i)]), param(q.scales, g), param(q.biases, g));
            ASSERT_EQ(f.data<float>()[r * cols + i], want)
                << bits << " bits, group " << group << ", " << dtype_name(params) << ", row " << r << ", value " << i;
          }
      }
}

TEST(AffineWeights, F16ScalesRoundToNearestEven) {
  auto rng = fresh_rng();
  std::uniform_real_distribution<float> exponent(-26.0f, 16.0f), unit(-1.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) {
    const float v = unit(rng) * std::exp2(exponent(rng));
    const float back = f16_to_f32(f32_to_f16(v));
    // Within half a step of f16 at v's magnitude (2^-24 below the normal range).
    const float step = std::abs(v) < 6.103515625e-05f ? 5.9604645e-08f : std::exp2(std::floor(std::log2(std::abs(v))) - 10);
    ASSERT_LE(std::abs(back - v), 0.5f * step) << v;
    ASSERT_EQ(f16_to_f32(f32_to_f16(back)), back) << "an f16 value converts to itself: " << back;
  }
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);  // 65504, the largest
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // ties to even: infinity
  EXPECT_EQ(f32_to_f16(-1.0f), 0xbc00);
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);  // a tie goes to the even mantissa
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);
}

TEST(AffineWeights, ThreeBitPacksAsMlxDoes) {
  // MLX packs 3-bit values 8 to 3 bytes, little-endian and low bits first:
  // values 0..7 (and again) give the bytes 0x88 0xC6 0xFA per pack.
  Tensor packed = Tensor::empty({1, 3}, DType::u32);
  std::fill_n(packed.data<uint32_t>(), 3, 0u);
  for (int i = 0; i < 32; ++i) pack_code(packed.data<uint32_t>(), 3, i, uint32_t(i % 8));
  const auto* bytes = static_cast<const uint8_t*>(packed.raw());
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(bytes[3 * p], 0x88) << p;
    EXPECT_EQ(bytes[3 * p + 1], 0xC6) << p;
    EXPECT_EQ(bytes[3 * p + 2], 0xFA) << p;
  }
}

TEST(AffineWeights, QuantizeKeepsEachValueWithinAStep) {
  auto rng = fresh_rng();
  for (int bits : kBits)
    for (int group : kGroups) {
      const Tensor w = random_tensor({4, 384}, DType::f32, rng);
      const Tensor q = quantize_affine(w, bits, group, DType::f32);
      const Tensor back = dequantize_affine(q);
      const AffineQuant& a = q.affine_quant();
      for (int64_t i = 0; i < w.numel(); ++i) {
        const float step = std::abs(a.scales.data<float>()[i / group]);
        ASSERT_LE(std::abs(back.data<float>()[i] - w.data<float>()[i]), step * 1.001f + 1e-6f)
            << bits << " bits, group " << group << ", value " << i;
      }
      // The group's extreme of larger magnitude is kept exactly.
      for (int64_t g = 0; g < w.numel() / group; ++g) {
        const float* v = w.data<float>() + g * group;
        float edge = v[0];
        for (int i = 1; i < group; ++i)
          if (std::abs(v[i]) > std::abs(edge)) edge = v[i];
        EXPECT_EQ(a.biases.data<float>()[g], edge) << bits << " bits, group " << group;
      }
    }
}

TEST(AffineWeights, SlicesAndReshapesCarryTheirScales) {
  auto rng = fresh_rng();
  const KnownAffine k = known_affine(12, 128, 4, 32, DType::bf16, rng);
  const Tensor all = dequantize_affine(k.w);
  const Tensor part = dequantize_affine(k.w.slice_rows(5, 9));
  for (int64_t i = 0; i < 4 * 128; ++i) ASSERT_EQ(part.data<float>()[i], all.data<float>()[5 * 128 + i]);
  const Tensor stacked = k.w.reshape({3, 4, 128});
  EXPECT_EQ(stacked.affine_quant().scales.shape(), (std::vector<int64_t>{3, 4, 4}));
  EXPECT_EQ(k.w.nbytes(), size_t(12 * 128 * 4 / 8));
  EXPECT_THROW(k.w.reshape({12 * 128}), Error);
}

TEST(AffineWeights, ShapesThatDisagreeAreErrorsNamingTheTensor) {
  Tensor codes = Tensor::empty({4, 16}, DType::u32), scales = Tensor::empty({4, 4}, DType::bf16);
  try {
    Tensor::affine(codes, 128, AffineQuant{8, 32, scales, scales}, "model.layers.0.mlp.up_proj.weight");
    FAIL() << "8-bit codes of 128 columns need 32 words a row";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.up_proj.weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::affine(codes, 128, AffineQuant{7, 32, scales, scales}, "w"), Error);
  EXPECT_THROW(Tensor::affine(codes, 128, AffineQuant{4, 48, scales, scales}, "w"), Error);
}

// x · Wᵀ with W dequantized, in double: what every fast path must give.
std::vector<float> expected(const Tensor& x, const Tensor& w_f32, const float* bias) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w_f32.dim(0);
  std::vector<float> y(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += double(x.data<float>()[i * k + t]) * w_f32.data<float>()[j * k + t];
      y[size_t(i * n + j)] = float(s) + (bias ? bias[j] : 0.0f);
    }
  return y;
}

// |got − want| against the scale of the sum's terms, Σ|x|·|w|, per output.
void expect_matmul_close(const float* got, const std::vector<float>& want, const Tensor& x, const Tensor& w_f32,
                         const std::string& what, int64_t first_column = 0) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w_f32.dim(0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = first_column; j < n; ++j) {
      double mag = 0;
      for (int64_t t = 0; t < k; ++t)
        mag += std::abs(double(x.data<float>()[i * k + t]) * w_f32.data<float>()[j * k + t]);
      ASSERT_LE(std::abs(double(got[i * n + j]) - want[size_t(i * n + j)]), 2e-6 * mag + 1e-6)
          << what << ": row " << i << ", column " << j;
    }
}

// The kernel arguments for x [M, K] against a quantized weight.
cpu::QuantMatmulArgs kernel_args(const Tensor& x, const Tensor& w) {
  const AffineQuant& q = w.affine_quant();
  cpu::QuantMatmulArgs a;
  a.x = x.data<float>();
  a.codes = w.data<uint32_t>();
  a.scales = q.scales.raw();
  a.biases = q.biases.raw();
  a.params = q.scales.dtype();
  a.bits = q.bits;
  a.group = q.group_size;
  a.M = x.dim(0);
  a.N = w.dim(0);
  a.K = x.dim(1);
  return a;
}

TEST(QuantizedMatmul, EveryPathMatchesTheDequantizedProduct) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  for (int bits : kBits)
    for (int group : kGroups)
      for (int64_t m : {1, 3, 16, 17, 40, 101}) {
        const DType params = m == 3 ? DType::f16 : m == 17 ? DType::f32 : DType::bf16;
        const int64_t n = 40, k = 512;
        const KnownAffine w = known_affine(n, k, bits, group, params, rng);
        const Tensor w_f32 = dequantize_affine(w.w);
        const Tensor x = random_tensor({m, k}, DType::f32, rng);
        const Tensor bias = random_tensor({n}, DType::f32, rng);
        const std::vector<float> want = expected(x, w_f32, bias.data<float>());
        const std::string what = std::to_string(bits) + " bits, group " + std::to_string(group) +
                                 ", M=" + std::to_string(m) + ", " + dtype_name(params) + " scales";
        Tensor y = Tensor::empty({m, n}, DType::f32);
        backend->matmul(x, w.w, &bias, y);
        expect_matmul_close(y.data<float>(), want, x, w_f32, "backend " + what);
        // bf16 compute rounds x, never W.
        Tensor xr = Tensor::empty({m, k}, DType::f32);
        for (int64_t i = 0; i < m * k; ++i) xr.data<float>()[i] = bf16_to_f32(f32_to_bf16(x.data<float>()[i]));
        backend->matmul(x, w.w, &bias, y, /*bf16_inputs=*/true);
        expect_matmul_close(y.data<float>(), expected(xr, w_f32, bias.data<float>()), xr, w_f32, "bf16 x, " + what);
        // The reference itself.
        cpu::QuantMatmulArgs a = kernel_args(x, w.w);
        a.bias = bias.data<float>();
        std::vector<float> ref(size_t(m * n), NAN);
        a.y = ref.data();
        cpu::quant_matmul_reference(a, 0, n);
        expect_matmul_close(ref.data(), want, x, w_f32, "reference " + what);
      }
}

TEST(QuantizedMatmul, PackedGemvMatchesTheReference) {
  if (cpu::detect_isa() != cpu::Isa::avx512) GTEST_SKIP() << "skipped: no AVX-512 (the packed GEMV is AVX-512 only)";
  auto rng = fresh_rng();
  for (int bits : kBits)
    for (int group : kGroups)
      for (int64_t m : {1, 2, 5, 16})
        for (bool bf16 : {false, true}) {
          const int64_t n = 37, k = 1024;
          // 2, 4 and 8 bits read x reordered into planes; 3, 5 and 6 read it in order.
          const bool planes = bits == 2 || bits == 4 || bits == 8;
          ASSERT_EQ(cpu::quant_gemv_planes_take(bits, k), planes);
          const DType params = group == 32 ? DType::f16 : group == 64 ? DType::bf16 : DType::f32;
          const KnownAffine w = known_affine(n, k, bits, group, params, rng);
          Tensor x = random_tensor({m, k}, DType::f32, rng);
          if (bf16)  // bf16 compute hands the kernel bf16-rounded x
            for (int64_t i = 0; i < m * k; ++i) x.data<float>()[i] = bf16_to_f32(f32_to_bf16(x.data<float>()[i]));
          std::vector<float> x_planes(size_t(m * cpu::quant_gemv_plane_elements(bits, k, bf16))),
              sums(size_t(m * k / group), 0.0f);
          if (planes) cpu::quant_gemv_planes(x.data<float>(), m, k, bits, bf16, x_planes.data());
          for (int64_t i = 0; i < m * k; ++i) sums[size_t(i / group)] += x.data<float>()[i];
          // 3, 5 and 6 bits with bf16 x also run on x in bf16 (vdpbf16ps; with AVX512-VBMI).
          std::vector<bf16_t> xb(size_t(m * k));
          for (int64_t i = 0; i < m * k; ++i) xb[size_t(i)] = f32_to_bf16(x.data<float>()[i]);
          for (const bool with_xb : {false, true}) {
            if (with_xb && (planes || !bf16)) continue;
            cpu::QuantMatmulArgs a = kernel_args(x, w.w);
            a.x_planes = planes ? x_planes.data() : nullptr;
            a.bf16_planes = planes && bf16;
            a.x_group_sums = sums.data();
            a.xb = with_xb ? xb.data() : nullptr;
            std::vector<float> got(size_t(m * n), NAN), ref(size_t(m * n), NAN);
            a.y = got.data();
            cpu::quant_gemv_avx512(a, 3, n);  // a column range, as a thread gets
            a.y = ref.data();
            cpu::quant_matmul_reference(a, 3, n);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < 3; ++j)
                EXPECT_TRUE(std::isnan(got[size_t(i * n + j)])) << "wrote outside its range";
            expect_matmul_close(got.data(), ref, x, dequantize_affine(w.w),
                                std::to_string(bits) + " bits, group " + std::to_string(group) +
                                    ", M=" + std::to_string(m) + (bf16 ? ", bf16 x" : ", f32 x") +
                                    (with_xb ? " (bf16 pairs)" : ""),
                                3);
          }
        }
}

// The prefill kernels on bf16 x (quant_gemm: AVX-512, and AMX tiles real or
// emulated) on one panel of columns, against the reference: row counts that
// end in whole 32-row blocks, a lone 16-row tile and rows past the last tile;
// 48 columns (a 32-column block and a 16-column one).
TEST(QuantizedMatmul, PairGemmMatchesTheReference) {
  if (cpu::detect_isa() != cpu::Isa::avx512) GTEST_SKIP() << "skipped: no AVX-512 (the pair GEMM is AVX-512 only)";
  std::vector<std::pair<std::string, cpu::QuantGemm>> kernels = {{"avx512", cpu::quant_gemm_avx512},
                                                       {"amx (emulated tiles)", cpu::quant_gemm_amx_emulated}};
  if (cpu::amx_bf16_available()) kernels.push_back({"amx", cpu::quant_gemm_amx});
  auto rng = fresh_rng();
  for (int bits : kBits)
    for (int group : kGroups)
      for (int64_t m : {16, 33, 112}) {
        const int64_t n = 64, k = 256, n0 = 16;
        const KnownAffine w = known_affine(n, k, bits, group, DType::bf16, rng);
        Tensor x = random_tensor({m, k}, DType::f32, rng);
        std::vector<bf16_t> xb(size_t(m * k));
        std::vector<float> sums(size_t(m * k / group), 0.0f);
        for (int64_t i = 0; i < m * k; ++i) {
          xb[size_t(i)] = f32_to_bf16(x.data<float>()[i]);
          x.data<float>()[i] = bf16_to_f32(xb[size_t(i)]);
          sums[size_t(i / group)] += x.data<float>()[i];
        }
        const Tensor bias = random_tensor({n}, DType::f32, rng);
        cpu::QuantMatmulArgs a = kernel_args(x, w.w);
        a.bias = bias.data<float>();
        a.x_group_sums = sums.data();
        std::vector<float> ref(size_t(m * n), NAN);
        a.y = ref.data();
        cpu::quant_matmul_reference(a, n0, n);
        std::vector<float> scratch(size_t(cpu::quant_gemm_scratch_bytes(k, group) / 4));
        for (const auto& [name, gemm] : kernels) {
          std::vector<float> got(size_t(m * n), NAN);
          a.y = got.data();
          gemm(a, xb.data(), n0, n, scratch.data());
          const std::string what =
              name + ", " + std::to_string(bits) + " bits, group " + std::to_string(group) + ", M=" + std::to_string(m);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n0; ++j) ASSERT_TRUE(std::isnan(got[size_t(i * n + j)])) << what << ": wrote outside";
          expect_matmul_close(got.data(), ref, x, dequantize_affine(w.w), what, n0);
        }
      }
}

TEST(QuantizedMatmul, EmbeddingGathersDequantizedRows) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  const KnownAffine table = known_affine(50, 256, 6, 64, DType::bf16, rng);
  const Tensor all = dequantize_affine(table.w);
  const std::vector<int32_t> ids = testing::random_ids(9, 50, rng);
  Tensor out = Tensor::empty({9, 256}, DType::f32);
  backend->embedding(table.w, ids, out);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t d = 0; d < 256; ++d)
      ASSERT_EQ(out.data<float>()[int64_t(i) * 256 + d], all.data<float>()[ids[i] * 256 + d]) << i << ", " << d;
}

}  // namespace
}  // namespace fathom
