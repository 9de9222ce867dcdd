// The attention kernel against its reference: GQA, f32 and bf16 caches,
// queries in the middle of the cache (chunked prefill) and sliding windows.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;
using testing::relative_error;

struct Case {
  int64_t t, heads, kv_heads, head_dim, length, first;
  std::optional<int64_t> window;
};

TEST(Attention, BackendMatchesReference) {
  uint64_t seed;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto backend = make_cpu_backend();
  const Case cases[] = {
      {1, 8, 2, 64, 1, 0, {}},        // first decode step
      {1, 8, 8, 32, 50, 49, {}},      // decode, MHA
      {13, 4, 2, 16, 13, 0, {}},      // whole-prompt prefill
      {7, 6, 3, 24, 40, 33, {}},      // a chunk at the end of the cache
      {9, 4, 1, 16, 30, 21, 5},       // windowed chunk
      {1, 4, 2, 128, 70, 69, 16},     // windowed decode
  };
  for (const Case& c : cases)
    for (DType kv_dtype : {DType::f32, DType::bf16}) {
      const int64_t capacity = c.length + 3;  // head stride larger than the valid length
      Tensor q = random_tensor({c.t, c.heads, c.head_dim}, DType::f32, rng);
      Tensor k = random_tensor({c.kv_heads, capacity, c.head_dim}, kv_dtype, rng);
      Tensor v = random_tensor({c.kv_heads, capacity, c.head_dim}, kv_dtype, rng);
      KvView view{nullptr, k.raw(), v.raw(), kv_dtype, c.kv_heads, c.head_dim, c.length, capacity * c.head_dim};
      AttentionParams p;
      p.scale = 0.3f;
      p.first_position = c.first;
      p.window = c.window;
      Tensor out = Tensor::empty(q.shape(), DType::f32);
      backend->attention(q, view, p, out);
      std::vector<float> ref(static_cast<size_t>(q.numel()));
      cpu::attention_rows_reference(q.data<float>(), c.heads, view, p, 0, c.t, ref.data());
      EXPECT_LT(relative_error(out.data<float>(), ref.data(), q.numel()), 1e-5)
          << "t=" << c.t << " length=" << c.length << " kv=" << dtype_name(kv_dtype);
    }
}

TEST(Attention, DecodeShapesMatchReference) {
  // One query row at real model shapes (Qwen3-0.6B, Llama-3.2-1B, MHA, odd
  // groups); the windowed ones over a cache that has dropped its first rows.
  uint64_t seed;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto backend = make_cpu_backend();
  const Case cases[] = {
      {1, 16, 8, 128, 600, 0, {}},  // the query's position is the last row's, set below
      {1, 32, 8, 64, 300, 0, {}},
      {1, 6, 6, 96, 41, 0, {}},
      {1, 12, 2, 128, 77, 0, 32},
      {1, 16, 8, 128, 64, 0, 64},
      {1, 24, 2, 256, 33, 0, {}},
      {1, 10, 2, 80, 50, 0, {}},  // head_dim the fast kernel leaves to the tiles
  };
  for (const Case& c : cases)
    for (DType kv_dtype : {DType::f32, DType::bf16}) {
      const int64_t capacity = c.length + 5, dropped = c.window ? 9 : 0;
      Tensor q = random_tensor({1, c.heads, c.head_dim}, DType::f32, rng);
      Tensor k = random_tensor({c.kv_heads, capacity, c.head_dim}, kv_dtype, rng);
      Tensor v = random_tensor({c.kv_heads, capacity, c.head_dim}, kv_dtype, rng);
      KvView view{nullptr, k.raw(), v.raw(), kv_dtype, c.kv_heads, c.head_dim, c.length, capacity * c.head_dim};
      view.first_position = dropped;
      AttentionParams p;
      p.scale = 1.0f / std::sqrt(float(c.head_dim));
      p.first_position = dropped + c.length - 1;
      p.window = c.window;
      Tensor out = Tensor::empty(q.shape(), DType::f32);
      backend->attention(q, view, p, out);
      std::vector<float> ref(static_cast<size_t>(q.numel()));
      cpu::attention_rows_reference(q.data<float>(), c.heads, view, p, 0, 1, ref.data());
      EXPECT_LT(relative_error(out.data<float>(), ref.data(), q.numel()), 1e-5)
          << "heads=" << c.heads << " kv_heads=" << c.kv_heads << " d=" << c.head_dim << " kv=" << dtype_name(kv_dtype);
    }
}

TEST(Attention, FastDecodeKernelMatchesReference) {
  uint64_t seed;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const cpu::Kernels kern = cpu::kernels_for(cpu::detect_isa());
  if (!kern.attend_decode) GTEST_SKIP() << "no fast decode kernel on this processor";
  for (int64_t nq : {1, 2, 3, 4, 5, 8, 16})
    for (int64_t d : {32, 64, 128, 256})
      for (int64_t n : {1, 7, 8, 9, 16, 17, 301})
        for (DType dtype : {DType::f32, DType::bf16}) {
          Tensor q = random_tensor({nq, d}, DType::f32, rng, 2.0f);
          Tensor k = random_tensor({n, d}, dtype, rng);
          Tensor v = random_tensor({n, d}, dtype, rng);
          std::vector<float> scratch(size_t(nq * d + std::min<int64_t>(nq, 8) * n));
          std::vector<float> fast(size_t(nq * d)), ref(fast.size());
          const float scale = 1.0f / std::sqrt(float(d));
          ASSERT_TRUE(kern.attend_decode(q.data<float>(), nq, scale, k.raw(), v.raw(), dtype, d, n, scratch.data(),
                                         fast.data()));
          cpu::attend_decode_reference(q.data<float>(), nq, scale, k.raw(), v.raw(), dtype, d, n, nullptr, ref.data());
          EXPECT_LT(relative_error(fast.data(), ref.data(), nq * d), 1e-5)
              << "nq=" << nq << " d=" << d << " n=" << n << " " << dtype_name(dtype);
        }
  std::vector<float> q(80), kv(80), scratch(160), out(80);
  EXPECT_FALSE(kern.attend_decode(q.data(), 1, 1.0f, kv.data(), kv.data(), DType::f32, 80, 1, scratch.data(), out.data()));
}

TEST(Softmax, FastRowMatchesReference) {
  auto rng = fresh_rng();
  const cpu::Isa best = cpu::detect_isa();
  for (int64_t n : {1, 15, 16, 17, 100, 700})
    for (int trial = 0; trial < 5; ++trial) {
      const int64_t first = int64_t(rng() % uint64_t(n)), last = first + int64_t(rng() % uint64_t(n - first));
      Tensor x = random_tensor({n}, DType::f32, rng, 8.0f);
      std::vector<float> fast(x.data<float>(), x.data<float>() + n), ref = fast;
      cpu::kernels_for(best).softmax_row(fast.data(), n, first, last);
      cpu::softmax_row_reference(ref.data(), n, first, last);
      for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(fast[j], ref[j], 1e-6f * std::max(1.0f, ref[j] * 4)) << j;
    }
}

TEST(Attention, SingleVisibleKeyReturnsItsValue) {
  // Position 0 sees only key 0, so the output is exactly v[0] of its group.
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  Tensor q = random_tensor({1, 4, 16}, DType::f32, rng);
  Tensor k = random_tensor({2, 5, 16}, DType::f32, rng);
  Tensor v = random_tensor({2, 5, 16}, DType::f32, rng);
  KvView view{nullptr, k.raw(), v.raw(), DType::f32, 2, 16, 5, 5 * 16};
  AttentionParams p;
  Tensor out = Tensor::empty(q.shape(), DType::f32);
  backend->attention(q, view, p, out);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t d = 0; d < 16; ++d)
      EXPECT_FLOAT_EQ(out.data<float>()[h * 16 + d], v.data<float>()[(h / 2) * 5 * 16 + d]);
}

TEST(Attention, RejectsQueriesBeyondTheCache) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  Tensor q = random_tensor({3, 2, 8}, DType::f32, rng);
  Tensor k = random_tensor({1, 4, 8}, DType::f32, rng);
  KvView view{nullptr, k.raw(), k.raw(), DType::f32, 1, 8, 4, 32};
  AttentionParams p;
  p.first_position = 2;
  Tensor out = Tensor::empty(q.shape(), DType::f32);
  EXPECT_THROW(backend->attention(q, view, p, out), Error);
}

}  // namespace
}  // namespace fathom
