// The KV codecs: affine round trips within their step size, Lloyd–Max
// codebooks at the known Gaussian optimum, the Hadamard rotation, and
// attention over quantized caches against the reference.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/affine_codec.h"
#include "kv/kv_layer.h"
#include "kv/kv_scheme.h"
#include "backend/turbo_codec.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;
using testing::relative_error;

TEST(AffineCodec, PackingRoundTripsEveryWidth) {
  auto rng = fresh_rng();
  for (int bits : {2, 3, 4, 6, 8}) {
    const int64_t n = 64;
    std::vector<uint32_t> words(static_cast<size_t>(n * bits / 32), 0u);
    std::vector<uint32_t> codes;
    for (int64_t i = 0; i < n; ++i) {
      codes.push_back(uint32_t(rng() % (1u << bits)));
      pack_code(words.data(), bits, i, codes.back());
    }
    std::vector<int32_t> back(static_cast<size_t>(n));
    cpu::unpack_codes_reference(words.data(), bits, n, back.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(uint32_t(back[i]), codes[i]) << bits << " bits";
  }
  // 4-bit: value i sits in bits [4i, 4i + 4) of little-endian words, as in MLX.
  std::vector<uint32_t> w(1, 0u);
  for (int i = 0; i < 8; ++i) pack_code(w.data(), 4, i, uint32_t(i + 1));
  EXPECT_EQ(w[0], 0x87654321u);
}

TEST(AffineCodec, FastDequantizationMatchesReference) {
  auto rng = fresh_rng();
  for (int bits : {1, 2, 3, 4, 6, 8})
    for (int group : {32, 64, 128}) {
      const int64_t dim = 128;
      std::vector<uint32_t> codes(static_cast<size_t>(dim * bits / 32));
      for (auto& w : codes) w = uint32_t(rng());
      Tensor scales = random_tensor({dim / group}, DType::bf16, rng), biases = random_tensor({dim / group}, DType::bf16, rng);
      std::vector<float> fast(dim), ref(dim);
      cpu::best_dequant_affine_row()(codes.data(), scales.data<bf16_t>(), biases.data<bf16_t>(), DType::bf16, bits, group, dim,
                                     fast.data());
      cpu::dequant_affine_row_reference(codes.data(), scales.data<bf16_t>(), biases.data<bf16_t>(), DType::bf16, bits, group, dim,
                                        ref.data());
      EXPECT_EQ(fast, ref) << bits << " bits, group " << group;
      if (bits > 4) continue;
      float table[16];
      for (int c = 0; c < (1 << bits); ++c) table[c] = float(c) * 0.5f - 3.0f;
      cpu::best_dequant_table_row()(codes.data(), bits, table, dim, fast.data());
      cpu::dequant_table_row_reference(codes.data(), bits, table, dim, ref.data());
      EXPECT_EQ(fast, ref) << "table, " << bits << " bits";
    }
}

TEST(AffineCodec, RoundTripErrorIsWithinHalfAStep) {
  auto rng = fresh_rng();
  for (int bits : {1, 2, 3, 4, 6, 8})
    for (int group : {32, 64, 128}) {
      const AffineLayout layout{bits, group, 128};
      Tensor x = random_tensor({128}, DType::f32, rng, 2.0f);
      std::vector<uint32_t> codes(static_cast<size_t>(layout.words()));
      std::vector<bf16_t> scales(static_cast<size_t>(layout.groups())), biases(scales.size());
      affine_quantize_row(x.data<float>(), layout, codes.data(), scales.data(), biases.data());
      std::vector<float> back(128);
      affine_dequantize_row(codes.data(), scales.data(), biases.data(), layout, back.data());
      for (int64_t i = 0; i < 128; ++i) {
        const float step = bf16_to_f32(scales[i / group]);
        // Half a step, plus the bf16 rounding of the scale and bias.
        const float bound = 0.5f * step + 0.01f * (std::fabs(x.data<float>()[i]) + step * (1 << bits));
        EXPECT_LE(std::fabs(back[i] - x.data<float>()[i]), bound) << bits << " bits, group " << group;
      }
    }
}

TEST(TurboCodec, LloydMaxCodebooksReachTheGaussianOptimum) {
  // Known minimum MSE of an N-level quantizer of a unit Gaussian (Max 1960).
  const double optimum[] = {0.0, 0.3634, 0.1175, 0.03454, 0.009497};
  for (int bits = 1; bits <= 4; ++bits) {
    const auto& book = lloyd_max_codebook(bits);
    EXPECT_NEAR(book.mse, optimum[bits], optimum[bits] * 2e-3) << bits << " bits";
    ASSERT_EQ(book.centroids.size(), size_t(1) << bits);
    for (size_t i = 0; i < book.centroids.size(); ++i)  // symmetric
      EXPECT_NEAR(book.centroids[i], -book.centroids[book.centroids.size() - 1 - i], 1e-5);
    // Empirical MSE on fresh samples agrees with the analytic value.
    auto rng = fresh_rng();
    std::normal_distribution<float> normal;
    double se = 0.0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      const float x = normal(rng);
      const float y = book.centroids[book.encode(x)];
      se += double(x - y) * (x - y);
    }
    EXPECT_NEAR(se / n, book.mse, book.mse * 0.05) << bits << " bits";
  }
}

TEST(TurboCodec, HadamardRotationIsOrthogonal) {
  auto rng = fresh_rng();
  HadamardRotation r(128, rng());
  Tensor x = random_tensor({128}, DType::f32, rng);
  std::vector<float> y(x.data<float>(), x.data<float>() + 128);
  r.apply(y.data());
  double nx = 0, ny = 0;
  for (int i = 0; i < 128; ++i) {
    nx += double(x.data<float>()[i]) * x.data<float>()[i];
    ny += double(y[i]) * y[i];
  }
  EXPECT_NEAR(ny, nx, nx * 1e-5);
  r.apply_inverse(y.data());
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(y[i], x.data<float>()[i], 1e-5);
}

TEST(TurboCodec, RoundTripMseMatchesTheCodebook) {
  auto rng = fresh_rng();
  for (int bits = 2; bits <= 4; ++bits) {
    const auto& book = lloyd_max_codebook(bits);
    HadamardRotation r(128, rng());
    double err = 0, energy = 0;
    for (int trial = 0; trial < 200; ++trial) {
      Tensor x = random_tensor({128}, DType::f32, rng, 3.0f);
      std::vector<float> rot(x.data<float>(), x.data<float>() + 128), back(128);
      r.apply(rot.data());
      std::vector<uint32_t> codes(static_cast<size_t>(128 * bits / 32));
      float norm = 0;
      turbo_quantize_row(rot.data(), 128, book, codes.data(), &norm);
      turbo_dequantize_row(codes.data(), norm, 128, book, back.data());
      r.apply_inverse(back.data());
      for (int i = 0; i < 128; ++i) {
        err += double(back[i] - x.data<float>()[i]) * (back[i] - x.data<float>()[i]);
        energy += double(x.data<float>()[i]) * x.data<float>()[i];
      }
    }
    EXPECT_NEAR(err / energy, book.mse, book.mse * 0.15) << bits << " bits";
  }
}

// Attention over every codec: the blocked reader path against the reference,
// and the quantized result close to attention over the unquantized rows.
TEST(QuantizedAttention, MatchesReferenceAndStaysNearExact) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  const int64_t kv_heads = 2, heads = 4, d = 64, n = 150, t = 5;
  struct Case {
    LayerCodec codec;
    double tolerance;  // against exact attention
  };
  LayerCodec kv8{LayerCodec::Kind::affine, 8, 64}, kv4{LayerCodec::Kind::affine, 4, 32},
      kv3{LayerCodec::Kind::affine, 3, 64}, turbo44{LayerCodec::Kind::turbo, 16, 64, 4, 4},
      turbo23{LayerCodec::Kind::turbo, 16, 64, 2, 3};
  for (const Case& c : {Case{kv8, 0.02}, Case{kv4, 0.15}, Case{kv3, 0.3}, Case{turbo44, 0.2}, Case{turbo23, 0.5}}) {
    auto pool = std::make_shared<KvBlockPool>(4096, backend);
    KvLayerSpec spec;
    spec.plain = LayerCodec{}.format(kv_heads, d, DType::f32, pool->block_bytes());
    spec.capacity = n;
    spec.rotation_seed = rng();
    auto exact = make_kv_layer(pool, spec);
    spec.coded = c.codec.format(kv_heads, d, DType::f32, pool->block_bytes());
    auto coded = make_kv_layer(pool, spec);
    Tensor k = random_tensor({n, kv_heads, d}, DType::f32, rng), v = random_tensor({n, kv_heads, d}, DType::f32, rng);
    exact->append(k, v);
    coded->append(k, v);
    Tensor q = random_tensor({t, heads, d}, DType::f32, rng, 0.2f);
    AttentionParams p;
    p.scale = 0.125f;
    p.first_position = n - t;
    Tensor want = Tensor::empty(q.shape(), DType::f32), got = Tensor::empty(q.shape(), DType::f32);
    backend->attention(q, exact->view(), p, want);
    backend->attention(q, coded->view(), p, got);
    EXPECT_LT(relative_error(got.data<float>(), want.data<float>(), q.numel()), c.tolerance) << c.codec.label();
    {  // the tiles over coded blocks vs the reference, same view
      Tensor fast = Tensor::empty(q.shape(), DType::f32);
      backend->attention(q, coded->view(), p, fast);
      // A codebook cache holds rotated rows: the reference takes rotated
      // queries and its output is rotated back, as the backend does inside.
      const bool rotated = coded->view().format.codec == KvFormat::Codec::codebook;
      const HadamardRotation rotation(d, spec.rotation_seed);
      std::vector<float> rq(q.data<float>(), q.data<float>() + q.numel()), ref(rq.size());
      if (rotated)
        for (int64_t r = 0; r < t * heads; ++r) rotation.apply(rq.data() + r * d);
      cpu::attention_rows_reference(rq.data(), heads, coded->view(), p, 0, t, ref.data());
      if (rotated)
        for (int64_t r = 0; r < t * heads; ++r) rotation.apply_inverse(ref.data() + r * d);
      EXPECT_LT(relative_error(fast.data<float>(), ref.data(), q.numel()), 1e-5) << c.codec.label();
    }
  }
}

}  // namespace
}  // namespace fathom
