// The attention kernel against its reference: GQA, f32 and bf16 caches in
// blocks of several sizes, coded caches, queries in the middle of the cache
// (chunked prefill) and sliding windows.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/turbo_codec.h"
#include "kv/paged_kv_layer.h"
#include "test_util.h"

namespace fathom {
namespace cpu {
void gemm_pv_amx_emulated(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n, int64_t d,
                          float* y, int64_t ldy, bf16_t* panel);  // amx_emulated_tiles.cpp
void gemm_qk_amx_emulated(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk,
                          int64_t n, float* s, int64_t lds);
}
namespace {

using testing::fresh_rng;
using testing::random_tensor;
using testing::relative_error;

// `length` random rows from position `first` in blocks of `block_rows`.
struct RandomBlocks {
  std::vector<Tensor> storage;
  std::vector<std::byte*> table;
  KvView view;
  RandomBlocks(int64_t kv_heads, int64_t head_dim, DType dtype, int64_t block_rows, int64_t length, int64_t first,
               std::mt19937_64& rng) {
    KvFormat& f = view.format;
    f.dtype = dtype;
    f.kv_heads = kv_heads;
    f.head_dim = head_dim;
    f.block_rows = block_rows;
    for (int64_t b = 0; b < (length + block_rows - 1) / block_rows; ++b) {
      storage.push_back(random_tensor({f.bytes() / int64_t(dtype_size(dtype))}, dtype, rng));
      table.push_back(static_cast<std::byte*>(storage.back().raw()));
    }
    view.blocks = table.data();
    view.length = length;
    view.first_position = first;
  }
};

struct Case {
  int64_t t, heads, kv_heads, head_dim, length, first;
  std::optional<int64_t> window;
};

TEST(Attention, BackendMatchesReference) {
  auto rng = fresh_rng();
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
    for (DType kv_dtype : {DType::f32, DType::bf16})
      for (int64_t block_rows : {1, 5, 32}) {
      Tensor q = random_tensor({c.t, c.heads, c.head_dim}, DType::f32, rng);
      RandomBlocks cache(c.kv_heads, c.head_dim, kv_dtype, block_rows, c.length, 0, rng);
      const KvView& view = cache.view;
      AttentionParams p;
      p.scale = 0.3f;
      p.first_position = c.first;
      p.window = c.window;
      Tensor out = Tensor::empty(q.shape(), DType::f32);
      backend->attention(q, view, p, out);
      std::vector<float> ref(static_cast<size_t>(q.numel()));
      cpu::attention_rows_reference(q.data<float>(), c.heads, view, p, 0, c.t, ref.data());
      EXPECT_LT(relative_error(out.data<float>(), ref.data(), q.numel()), 1e-5)
          << "t=" << c.t << " length=" << c.length << " kv=" << dtype_name(kv_dtype) << " block " << block_rows;
    }
}

// The reference with bf16 compute's roundings where the CPU takes bf16 tiles:
// each query (scaled) and each probability rounded to bf16, sums in double.
void rounded_reference(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p, int64_t t1,
                       float* out) {
  const int64_t group = heads / kv.kv_heads(), d = kv.head_dim();
  std::vector<float> k(static_cast<size_t>(d)), v(static_cast<size_t>(d)), qb(static_cast<size_t>(d));
  for (int64_t t = 0; t < t1; ++t) {
    const int64_t pos = p.first_position + t;
    const int64_t lo = (p.window ? std::max(kv.first_position, pos - *p.window + 1) : kv.first_position) -
                       kv.first_position,
                  hi = pos - kv.first_position;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < d; ++i) qb[size_t(i)] = bf16_to_f32(f32_to_bf16(q[(t * heads + h) * d + i] * p.scale));
      std::vector<double> w;
      double max_score = -INFINITY, sum = 0.0;
      for (int64_t j = lo; j <= hi; ++j) {
        cpu::read_kv_row(kv, false, h / group, j, k.data());
        double s = 0.0;
        for (int64_t i = 0; i < d; ++i) s += double(qb[size_t(i)]) * k[size_t(i)];
        w.push_back(s);
        max_score = std::max(max_score, s);
      }
      for (auto& x : w) sum += (x = std::exp(x - max_score));
      std::vector<double> acc(static_cast<size_t>(d), 0.0);
      for (int64_t j = lo; j <= hi; ++j) {
        cpu::read_kv_row(kv, true, h / group, j, v.data());
        const double prob = bf16_to_f32(f32_to_bf16(float(w[size_t(j - lo)] / sum)));
        for (int64_t i = 0; i < d; ++i) acc[size_t(i)] += prob * v[size_t(i)];
      }
      for (int64_t i = 0; i < d; ++i) out[(t * heads + h) * d + i] = float(acc[size_t(i)]);
    }
  }
}

// bf16 compute over bf16 caches, in chunks longer than a verify step: the
// queries and probabilities are multiplied as bf16 (AMX tiles where the
// processor has them). Runs of keys that are not whole 32-key steps, heads of
// 32 to 128, a chunk at the end of the cache and a window. No tile is a lone
// row (16 / group rows a tile): that row takes decode's path, unrounded.
TEST(Attention, Bf16TilesMatchTheRoundedReference) {
  if (!cpu::kernels_for(cpu::detect_isa()).gemm_pv) GTEST_SKIP() << "skipped: no bf16 attention kernels (AVX-512)";
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  const Case cases[] = {
      {40, 8, 2, 64, 40, 0, {}},
      {24, 16, 8, 128, 60, 36, {}},
      {34, 4, 4, 32, 34, 0, 9},
      {17, 6, 2, 96, 70, 53, {}},
  };
  for (const Case& c : cases)
    for (int64_t block_rows : {7, 32, 256}) {
      Tensor q = random_tensor({c.t, c.heads, c.head_dim}, DType::f32, rng);
      RandomBlocks cache(c.kv_heads, c.head_dim, DType::bf16, block_rows, c.length, 0, rng);
      AttentionParams p;
      p.scale = 0.3f;
      p.first_position = c.first;
      p.window = c.window;
      p.bf16_inputs = true;
      Tensor out = Tensor::empty(q.shape(), DType::f32);
      backend->attention(q, cache.view, p, out);
      std::vector<float> ref(static_cast<size_t>(q.numel()));
      rounded_reference(q.data<float>(), c.heads, cache.view, p, c.t, ref.data());
      // Next to a bf16 rounding boundary a probability may round the other
      // way (one flip moves this test's output by ~1e-4 relative with 9 keys
      // in view; measured up to 3.4e-4). The unrounded reference is further:
      // ~3e-3 away, so the roundings are there.
      std::vector<float> unrounded(static_cast<size_t>(q.numel()));
      cpu::attention_rows_reference(q.data<float>(), c.heads, cache.view, p, 0, c.t, unrounded.data());
      const double err = relative_error(out.data<float>(), ref.data(), q.numel());
      EXPECT_LT(err, 1e-3) << "t=" << c.t << " d=" << c.head_dim << " block " << block_rows;
      EXPECT_LT(3 * err, relative_error(out.data<float>(), unrounded.data(), q.numel()))
          << "t=" << c.t << " d=" << c.head_dim << " block " << block_rows;
    }
}

// The P·V kernels against the plain one: runs of keys past and short of the
// 32-key step, rows past a tile, heads 32 to 128.
TEST(GemmPv, FastKernelsMatchReference) {
  auto rng = fresh_rng();
  std::vector<std::pair<const char*, cpu::GemmPv>> kernels;
  if (cpu::detect_isa() == cpu::Isa::avx512) {
    kernels.push_back({"avx512", cpu::gemm_pv_avx512});
    kernels.push_back({"amx (emulated tiles)", cpu::gemm_pv_amx_emulated});
  }
  if (cpu::amx_bf16_available()) kernels.push_back({"amx", cpu::gemm_pv_amx});
  if (kernels.empty()) GTEST_SKIP() << "skipped: no bf16 attention kernels (AVX-512)";
  struct Shape {
    int64_t m, n, d;
  };
  for (const Shape s : {Shape{16, 1, 32}, Shape{16, 45, 128}, Shape{21, 32, 64}, Shape{34, 77, 96}, Shape{7, 256, 128}})
    for (const auto& [name, kernel] : kernels) {
      const int64_t ldp = s.n + 40, ldv = s.d + 8;
      Tensor p = random_tensor({s.m, ldp}, DType::bf16, rng), v = random_tensor({s.n, ldv}, DType::bf16, rng);
      Tensor y0 = random_tensor({s.m, s.d}, DType::f32, rng);
      std::vector<float> fast(y0.data<float>(), y0.data<float>() + y0.numel()), ref = fast;
      std::vector<bf16_t> panel(static_cast<size_t>(cpu::gemm_pv_panel_elements(s.n, s.d)));
      kernel(p.data<bf16_t>(), ldp, v.data<bf16_t>(), ldv, s.m, s.n, s.d, fast.data(), s.d, panel.data());
      cpu::gemm_pv_reference(p.data<bf16_t>(), ldp, v.data<bf16_t>(), ldv, s.m, s.n, s.d, ref.data(), s.d, nullptr);
      EXPECT_LT(relative_error(fast.data(), ref.data(), int64_t(fast.size())), 1e-5)
          << name << " m=" << s.m << " n=" << s.n << " d=" << s.d;
    }
}

// The scores kernels against the plain one: 16 queries and fewer, keys in
// whole 16s and 32s and not, heads 32 to 512.
TEST(GemmQk, FastKernelsMatchReference) {
  auto rng = fresh_rng();
  std::vector<std::pair<const char*, cpu::GemmQk>> kernels;
  if (cpu::detect_isa() == cpu::Isa::avx512) {
    kernels.push_back({"avx512", cpu::gemm_qk_avx512});
    kernels.push_back({"amx (emulated tiles)", cpu::gemm_qk_amx_emulated});
  }
  if (cpu::amx_bf16_available()) kernels.push_back({"amx", cpu::gemm_qk_amx});
  if (kernels.empty()) GTEST_SKIP() << "skipped: no bf16 attention kernels (AVX-512)";
  struct Shape {
    int64_t rows, n, d;
  };
  for (const Shape s : {Shape{16, 1, 32}, Shape{16, 48, 128}, Shape{5, 33, 64}, Shape{12, 100, 96}, Shape{16, 64, 512},
                        Shape{1, 17, 128}})
    for (const auto& [name, kernel] : kernels) {
      const int64_t ldq = s.d + 8, ldk = s.d + 40, lds = s.n + 3;
      Tensor q = random_tensor({s.rows, ldq}, DType::bf16, rng), k = random_tensor({s.n, ldk}, DType::bf16, rng);
      std::vector<float> fast(static_cast<size_t>(s.rows * lds), 7.0f), ref = fast;
      kernel(q.data<bf16_t>(), ldq, s.rows, s.d, k.data<bf16_t>(), ldk, s.n, fast.data(), lds);
      cpu::gemm_qk_reference(q.data<bf16_t>(), ldq, s.rows, s.d, k.data<bf16_t>(), ldk, s.n, ref.data(), lds);
      EXPECT_LT(relative_error(fast.data(), ref.data(), int64_t(fast.size())), 1e-5)
          << name << " rows=" << s.rows << " n=" << s.n << " d=" << s.d;
    }
}

TEST(Attention, DecodeShapesMatchReference) {
  // One query row at real model shapes (Qwen3-0.6B, Llama-3.2-1B, MHA, odd
  // groups); the windowed ones over a cache that has dropped its first rows.
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  const Case cases[] = {
      {1, 16, 8, 128, 600, 0, {}},  // the query's position is the last row's, set below
      {1, 32, 8, 64, 300, 0, {}},
      {1, 6, 6, 96, 41, 0, {}},
      {1, 12, 2, 128, 77, 0, 32},
      {1, 16, 8, 128, 64, 0, 64},
      {1, 24, 2, 256, 33, 0, {}},
      {1, 10, 2, 80, 50, 0, {}},  // head_dim the fast kernel leaves to the tiles
      {1, 8, 2, 64, 4500, 0, {}},  // the most key segments (kDecodeMaxSegments)
      {1, 8, 4, 128, 1500, 0, 1000},  // segments of a window
  };
  for (const Case& c : cases)
    for (DType kv_dtype : {DType::f32, DType::bf16})
      for (int64_t block_rows : {7, 32}) {
      const int64_t dropped = c.window ? 9 : 0;
      Tensor q = random_tensor({1, c.heads, c.head_dim}, DType::f32, rng);
      RandomBlocks cache(c.kv_heads, c.head_dim, kv_dtype, block_rows, c.length, dropped, rng);
      const KvView& view = cache.view;
      AttentionParams p;
      p.scale = 1.0f / std::sqrt(float(c.head_dim));
      p.first_position = dropped + c.length - 1;
      p.window = c.window;
      Tensor out = Tensor::empty(q.shape(), DType::f32);
      backend->attention(q, view, p, out);
      std::vector<float> ref(static_cast<size_t>(q.numel()));
      cpu::attention_rows_reference(q.data<float>(), c.heads, view, p, 0, 1, ref.data());
      EXPECT_LT(relative_error(out.data<float>(), ref.data(), q.numel()), 1e-5)
          << "heads=" << c.heads << " kv_heads=" << c.kv_heads << " d=" << c.head_dim << " kv=" << dtype_name(kv_dtype)
          << " block " << block_rows;
    }
}

// The rows of a verify step are each computed as a decode step at that
// position would compute them, bit for bit, on any number of threads (the
// key segments depend only on the row's own span).
TEST(Attention, VerifyRowsEqualDecodeStepsBitForBit) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  const int64_t t = 6, heads = 16, kv_heads = 8, d = 128, length = 1300;
  RandomBlocks cache(kv_heads, d, DType::bf16, 32, length, 0, rng);
  Tensor q = random_tensor({t, heads, d}, DType::f32, rng);
  AttentionParams p;
  p.scale = 0.1f;
  p.first_position = length - t;
  p.bf16_inputs = true;
  Tensor together = Tensor::empty(q.shape(), DType::f32);
  backend->attention(q, cache.view, p, together);
  for (int64_t r = 0; r < t; ++r) {
    Tensor row = q.slice_rows(r, r + 1), alone = Tensor::empty(row.shape(), DType::f32);
    AttentionParams at = p;
    at.first_position = p.first_position + r;
    backend->attention(row, cache.view, at, alone);
    EXPECT_EQ(0, std::memcmp(alone.data<float>(), together.data<float>() + r * heads * d, size_t(heads * d) * 4))
        << "row " << r;
  }
}

TEST(Attention, FastDecodeKernelMatchesReference) {
  auto rng = fresh_rng();
  const cpu::Kernels kern = cpu::kernels_for(cpu::detect_isa());
  if (!kern.attend_decode) GTEST_SKIP() << "no fast decode kernel on this processor";
  for (int64_t nq : {1, 2, 3, 4, 5, 8, 16})
    for (int64_t d : {32, 64, 128, 256})
      for (int64_t n : {1, 7, 8, 9, 16, 17, 301})
        for (DType dtype : {DType::f32, DType::bf16}) {
          Tensor q = random_tensor({nq, d}, DType::f32, rng, 2.0f);
          Tensor k = random_tensor({n, d}, dtype, rng);
          Tensor v = random_tensor({n, d}, dtype, rng);
          // The rows in runs of 1..16 rows, as blocks of a cache hand them over.
          std::vector<cpu::KvRun> runs;
          const size_t row_bytes = size_t(d) * dtype_size(dtype);
          for (int64_t j = 0; j < n;) {
            const int64_t len = std::min<int64_t>(n - j, 1 + int64_t(rng() % 16));
            runs.push_back({static_cast<const char*>(k.raw()) + size_t(j) * row_bytes,
                            static_cast<const char*>(v.raw()) + size_t(j) * row_bytes, len});
            j += len;
          }
          std::vector<float> scratch(size_t(nq * d + std::min<int64_t>(nq, 8) * n));
          std::vector<float> fast(size_t(nq * d)), ref(fast.size()), fast_lse(fast.size()), ref_lse(fast.size());
          const float scale = 1.0f / std::sqrt(float(d));
          ASSERT_TRUE(kern.attend_decode(q.data<float>(), nq, scale, runs.data(), int64_t(runs.size()), dtype, d, n,
                                         scratch.data(), fast.data(), fast_lse.data()));
          cpu::attend_decode_reference(q.data<float>(), nq, scale, runs.data(), int64_t(runs.size()), dtype, d, n,
                                       nullptr, ref.data(), ref_lse.data());
          EXPECT_LT(relative_error(fast.data(), ref.data(), nq * d), 1e-5)
              << "nq=" << nq << " d=" << d << " n=" << n << " " << dtype_name(dtype) << " in " << runs.size() << " runs";
          for (int64_t i = 0; i < nq; ++i)
            EXPECT_NEAR(fast_lse[size_t(i)], ref_lse[size_t(i)], 1e-5 * (1 + std::abs(ref_lse[size_t(i)]))) << "lse " << i;
        }
  std::vector<float> q(80), kv(80), scratch(160), out(80);
  const cpu::KvRun run{kv.data(), kv.data(), 1};
  EXPECT_FALSE(kern.attend_decode(q.data(), 1, 1.0f, &run, 1, DType::f32, 80, 1, scratch.data(), out.data(), nullptr));
}

TEST(Attention, CodedBlocksMatchReference) {
  // The tiles widen coded blocks in place; the reference widens row by row.
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  auto pool = std::make_shared<KvBlockPool>(4096, backend);
  const int64_t kv_heads = 2, heads = 6, d = 64, length = 90;
  for (const auto& [codec, k_bits, v_bits, group] :
       {std::tuple{KvFormat::Codec::affine, 4, 4, 32}, std::tuple{KvFormat::Codec::affine, 8, 8, 64},
        std::tuple{KvFormat::Codec::affine, 3, 3, 32}, std::tuple{KvFormat::Codec::codebook, 3, 4, 0}}) {
    KvFormat f;
    f.codec = codec;
    f.k_bits = k_bits, f.v_bits = v_bits, f.group_size = group;
    f.kv_heads = kv_heads, f.head_dim = d;
    f = f.fitted_to(pool->block_bytes());
    PagedKvLayer layer(pool, f, length, std::nullopt, length, 11);
    layer.append(random_tensor({length, kv_heads, d}, DType::f32, rng), random_tensor({length, kv_heads, d}, DType::f32, rng));
    ASSERT_GT(layer.bytes(), pool->block_bytes()) << "several blocks";
    for (int64_t t : {1, 9}) {
      Tensor q = random_tensor({t, heads, d}, DType::f32, rng);
      AttentionParams p;
      p.scale = 0.125f;
      p.first_position = length - t;
      Tensor out = Tensor::empty(q.shape(), DType::f32);
      backend->attention(q, layer.view(), p, out);
      // A codebook cache holds rotated rows: the reference takes rotated
      // queries and its output is rotated back, as the backend does inside.
      const HadamardRotation rotation(d, 11);
      const bool rotated = codec == KvFormat::Codec::codebook;
      std::vector<float> rq(q.data<float>(), q.data<float>() + q.numel()), ref(rq.size());
      if (rotated)
        for (int64_t r = 0; r < t * heads; ++r) rotation.apply(rq.data() + r * d);
      cpu::attention_rows_reference(rq.data(), heads, layer.view(), p, 0, t, ref.data());
      if (rotated)
        for (int64_t r = 0; r < t * heads; ++r) rotation.apply_inverse(ref.data() + r * d);
      EXPECT_LT(relative_error(out.data<float>(), ref.data(), q.numel()), 1e-5) << "bits " << k_bits << " t " << t;
    }
  }
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
  RandomBlocks cache(2, 16, DType::f32, 3, 5, 0, rng);
  AttentionParams p;
  Tensor out = Tensor::empty(q.shape(), DType::f32);
  backend->attention(q, cache.view, p, out);
  const auto* block = reinterpret_cast<const float*>(cache.table[0]);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t d = 0; d < 16; ++d)
      EXPECT_FLOAT_EQ(out.data<float>()[h * 16 + d], block[cache.view.format.rows_offset(true, h / 2) / 4 + d]);
}

TEST(Attention, RejectsQueriesBeyondTheCache) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  Tensor q = random_tensor({3, 2, 8}, DType::f32, rng);
  RandomBlocks cache(1, 8, DType::f32, 4, 4, 0, rng);
  AttentionParams p;
  p.first_position = 2;
  Tensor out = Tensor::empty(q.shape(), DType::f32);
  EXPECT_THROW(backend->attention(q, cache.view, p, out), Error);
}

}  // namespace
}  // namespace fathom
