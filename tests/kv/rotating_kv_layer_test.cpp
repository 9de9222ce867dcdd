// The sliding-window cache: attention over a layer that drops old rows equals
// attention over a cache that keeps every row, for plain and coded storage,
// across steps of random sizes; trimming respects what was dropped; storage
// stays at window - 1 + step rows.
#include "kv/rotating_kv_layer.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "kv/kv_scheme.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;

constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 32;

struct Pair {
  std::unique_ptr<KvLayer> rotating, full;
};

Pair make_pair(const LayerCodec& codec, int64_t window, int64_t step, int64_t capacity, int64_t start) {
  auto storage = [&](int64_t rows) {
    return codec.kind == LayerCodec::Kind::plain
               ? make_plain_kv_layer(kKvHeads, kHeadDim, rows, DType::f32)
               : make_codec_kv_layer(kKvHeads, kHeadDim, rows, codec, start, DType::f32, 7);
  };
  return {make_rotating_kv_layer(storage(std::min(capacity, window - 1 + step)), window, capacity),
          storage(capacity)};
}

// Feeds both layers the same random steps (sizes 1..step) and compares every
// step's attention output.
void expect_same_attention(const LayerCodec& codec, int64_t window, int64_t step, int64_t start) {
  uint64_t seed = 0;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + " codec " + codec.label());
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
    p.rotating->append(k, v);
    p.full->append(k, v);
    p.rotating->attend(*backend, q, params, a);
    p.full->attend(*backend, q, params, b);
    ASSERT_LE(testing::relative_error(a.data<float>(), b.data<float>(), a.numel()), 1e-6) << "step at " << pos;
    p.rotating->end_step();
    p.full->end_step();
    pos += t;
    ++steps;
    EXPECT_EQ(p.rotating->length(), pos);
    EXPECT_LE(p.rotating->length() - p.rotating->first_position(), window - 1 + step);
  }
  EXPECT_GT(p.rotating->first_position(), 0) << "the test never dropped a row";
  EXPECT_LT(p.rotating->bytes(), p.full->bytes());
}

TEST(RotatingKvLayer, PlainStorageMatchesAFullCache) {
  for (int64_t window : {1, 5, 16})
    for (int64_t step : {1, 3, 9}) expect_same_attention(LayerCodec{}, window, step, 0);
}

TEST(RotatingKvLayer, CodedStorageMatchesAFullCache) {
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

TEST(RotatingKvLayer, TrimsBackOnlyToHeldPositions) {
  auto rng = fresh_rng();
  Pair p = make_pair(LayerCodec{}, 4, 2, 100, 0);
  for (int64_t i = 0; i < 10; ++i) {
    p.rotating->append(random_tensor({1, kKvHeads, kHeadDim}, DType::f32, rng),
                       random_tensor({1, kKvHeads, kHeadDim}, DType::f32, rng));
  }
  const int64_t first = p.rotating->first_position();
  ASSERT_GT(first, 0);
  p.rotating->trim(p.rotating->length() - 1);
  EXPECT_EQ(p.rotating->length(), 9);
  EXPECT_THROW(p.rotating->trim(first - 1), Error);
  p.rotating->trim(0);
  EXPECT_EQ(p.rotating->length(), 0);
  EXPECT_EQ(p.rotating->first_position(), 0);
}

TEST(RotatingKvLayer, RejectsAStepLongerThanItsStorage) {
  auto rng = fresh_rng();
  Pair p = make_pair(LayerCodec{}, 4, 2, 100, 0);
  for (int64_t i = 0; i < 6; ++i)
    p.rotating->append(random_tensor({1, kKvHeads, kHeadDim}, DType::f32, rng),
                       random_tensor({1, kKvHeads, kHeadDim}, DType::f32, rng));
  EXPECT_THROW(p.rotating->append(random_tensor({3, kKvHeads, kHeadDim}, DType::f32, rng),
                                  random_tensor({3, kKvHeads, kHeadDim}, DType::f32, rng)),
               Error);
}

TEST(RotatingKvLayer, StorageRowsCapAtWindowPlusStep) {
  nlohmann::json c = {{"model_type", "gemma3_text"}, {"vocab_size", 64}, {"hidden_size", 64},
                      {"intermediate_size", 128},     {"num_hidden_layers", 2},
                      {"num_attention_heads", 2},     {"num_key_value_heads", 1},
                      {"head_dim", 32},               {"sliding_window", 100},
                      {"layer_types", {"sliding_attention", "full_attention"}}};
  const ModelConfig m = parse_model_config(c);
  EXPECT_EQ(kv_layer_rows(m, 0, 50, 16), 50);
  EXPECT_EQ(kv_layer_rows(m, 0, 5000, 16), 115);
  EXPECT_EQ(kv_layer_rows(m, 1, 5000, 16), 5000);
}

}  // namespace
}  // namespace fathom
