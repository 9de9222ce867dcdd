// The sliding-window cache: attention over a layer that reuses its oldest
// blocks equals attention over a cache that keeps every row, for plain and
// coded storage, across steps of random sizes; trimming respects what was
// dropped; storage stays within kv_max_blocks.
#include "kv/kv_layer.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "kv/kv_layout.h"
#include "kv/kv_scheme.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;

constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 32;

struct Pair {
  std::unique_ptr<KvLayer> sliding, full;
};

// Blocks of 4 plain f32 rows, so a window spans several.
const auto kPool = std::make_shared<KvBlockPool>(4 * 2 * kKvHeads * kHeadDim * 4, make_cpu_backend());

Pair make_pair(const LayerCodec& codec, int64_t window, int64_t step, int64_t capacity, int64_t start) {
  KvLayerSpec spec;
  spec.plain = LayerCodec{}.format(kKvHeads, kHeadDim, DType::f32, kPool->block_bytes());
  if (codec.kind != LayerCodec::Kind::plain) spec.coded = codec.format(kKvHeads, kHeadDim, DType::f32, kPool->block_bytes());
  spec.start = start;
  spec.capacity = capacity;
  spec.step = step;
  spec.rotation_seed = 7;
  KvLayerSpec sliding = spec;
  sliding.window = window;
  return {make_kv_layer(kPool, sliding), make_kv_layer(kPool, spec)};
}

// Feeds both layers the same random steps (sizes 1..step) and compares every
// step's attention output.
void expect_same_attention(const LayerCodec& codec, int64_t window, int64_t step, int64_t start) {
  auto rng = fresh_rng();
  SCOPED_TRACE("codec " + codec.label());
  const int64_t capacity = 6 * (window + step);
  Pair p = make_pair(codec, window, step, capacity, start);
  auto backend = make_cpu_backend();
  std::uniform_int_distribution<int64_t> size(1, step);
  int64_t pos = 0, steps = 0;
  while (pos < capacity) {
    const int64_t t = std::min(size(rng), capacity - pos);
    Tensor k = random_tensor({t, kKvHeads, kHeadDim}, DType::f32, rng);
    Tensor v = random_tensor({t, kKvHeads, kHeadDim}, DType::f32, rng);
    Tensor q = random_tensor({t, kHeads, kHeadDim}, DType::f32, rng);
    AttentionParams params;
    params.scale = 0.2f;
    params.first_position = pos;
    params.window = window;
    Tensor a = Tensor::empty(q.shape(), DType::f32), b = Tensor::empty(q.shape(), DType::f32);
    p.sliding->append(k, v);
    p.full->append(k, v);
    backend->attention(q, p.sliding->view(), params, a);
    backend->attention(q, p.full->view(), params, b);
    ASSERT_LE(testing::relative_error(a.data<float>(), b.data<float>(), a.numel()), 1e-6) << "step at " << pos;
    p.sliding->end_step();
    p.full->end_step();
    pos += t;
    ++steps;
    EXPECT_EQ(p.sliding->length(), pos);
    const KvFormat f = p.sliding->view().format;
    EXPECT_LE(p.sliding->bytes(), kv_max_blocks(f.block_rows, capacity, window, step) * kPool->block_bytes());
  }
  EXPECT_GT(p.sliding->first_position(), 0) << "the test never dropped a row";
  EXPECT_LT(p.sliding->bytes(), p.full->bytes());
}

TEST(SlidingKvLayer, PlainStorageMatchesAFullCache) {
  for (int64_t window : {1, 5, 16})
    for (int64_t step : {1, 3, 9}) expect_same_attention(LayerCodec{}, window, step, 0);
}

TEST(SlidingKvLayer, CodedStorageMatchesAFullCache) {
  LayerCodec kv4;
  kv4.kind = LayerCodec::Kind::affine;
  kv4.bits = 4;
  kv4.group_size = 32;
  expect_same_attention(kv4, 7, 5, 0);
  expect_same_attention(kv4, 7, 5, 20);  // delayed start: converts after rows were dropped
  LayerCodec turbo;
  turbo.kind = LayerCodec::Kind::turbo;
  turbo.k_bits = 3;
  turbo.v_bits = 4;
  expect_same_attention(turbo, 6, 4, 0);
}

TEST(SlidingKvLayer, TrimsBackOnlyToHeldPositions) {
  auto rng = fresh_rng();
  Pair p = make_pair(LayerCodec{}, 4, 2, 100, 0);
  for (int64_t i = 0; i < 20; ++i) {
    p.sliding->append(random_tensor({1, kKvHeads, kHeadDim}, DType::f32, rng),
                      random_tensor({1, kKvHeads, kHeadDim}, DType::f32, rng));
  }
  const int64_t first = p.sliding->first_position();
  ASSERT_GT(first, 0);
  p.sliding->trim(p.sliding->length() - 1);
  EXPECT_EQ(p.sliding->length(), 19);
  EXPECT_THROW(p.sliding->trim(first - 1), Error);
  p.sliding->trim(0);
  EXPECT_EQ(p.sliding->length(), 0);
  EXPECT_EQ(p.sliding->first_position(), 0);
}

// A fork shares the ring's blocks; as both go on with other rows, reusing
// their oldest blocks, neither overwrites what the other still reads.
TEST(SlidingKvLayer, ForksGoOnIndependently) {
  auto rng = fresh_rng();
  auto backend = make_cpu_backend();
  const int64_t window = 5, step = 2;
  Pair a = make_pair(LayerCodec{}, window, step, 100, 0);
  auto rows = [&](int64_t n) { return random_tensor({n, kKvHeads, kHeadDim}, DType::f32, rng); };
  for (int64_t i = 0; i < 13; ++i) {
    Tensor k = rows(1), v = rows(1);
    a.sliding->append(k, v);
    a.full->append(k, v);
  }
  Pair b{a.sliding->fork(100), a.full->fork(100)};
  for (int64_t pos = 13; pos < 40; pos += step)
    for (Pair* p : {&a, &b}) {
      Tensor k = rows(step), v = rows(step), q = random_tensor({step, kHeads, kHeadDim}, DType::f32, rng);
      p->sliding->append(k, v);
      p->full->append(k, v);
      AttentionParams params;
      params.scale = 0.2f;
      params.first_position = pos;
      params.window = window;
      Tensor got = Tensor::empty(q.shape(), DType::f32), want = Tensor::empty(q.shape(), DType::f32);
      backend->attention(q, p->sliding->view(), params, got);
      backend->attention(q, p->full->view(), params, want);
      ASSERT_LE(testing::relative_error(got.data<float>(), want.data<float>(), got.numel()), 1e-6) << "at " << pos;
    }
  EXPECT_GT(b.sliding->first_position(), 13) << "the fork reused blocks it had shared";
}

TEST(SlidingKvLayer, RejectsAStepLongerThanItWasMadeFor) {
  auto rng = fresh_rng();
  Pair p = make_pair(LayerCodec{}, 4, 2, 100, 0);
  for (int64_t i = 0; i < 12; ++i)
    p.sliding->append(random_tensor({1, kKvHeads, kHeadDim}, DType::f32, rng),
                       random_tensor({1, kKvHeads, kHeadDim}, DType::f32, rng));
  EXPECT_THROW(p.sliding->append(random_tensor({9, kKvHeads, kHeadDim}, DType::f32, rng),
                                  random_tensor({9, kKvHeads, kHeadDim}, DType::f32, rng)),
               Error);
}

TEST(SlidingKvLayer, BlocksCapAtWindowPlusStep) {
  // Window 100, steps of 16, blocks of 32 rows: 115 rows need 4 blocks, and
  // one more for a partly passed block.
  EXPECT_EQ(kv_max_blocks(32, 50, 100, 16), 2);
  EXPECT_EQ(kv_max_blocks(32, 5000, 100, 16), 5);
  EXPECT_EQ(kv_max_blocks(32, 5000, std::nullopt, 16), 157);
  EXPECT_EQ(kv_blocks_at(70, 32, 5), 3);
  EXPECT_EQ(kv_blocks_at(700, 32, 5), 5);
}

}  // namespace
}  // namespace fathom
