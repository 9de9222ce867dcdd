// Forked sequences share their KV blocks until one of them writes: a fork and
// its origin, continued with different tokens (after the origin's prefix, or
// after trimming back into a shared block), each give exactly the logits of a
// sequence that ran alone, on every architecture fixture and KV scheme; and
// every block goes back to the pool.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "model/model.h"
#include "test_util.h"

namespace fathom {
namespace {

// Logits of the last of `steps`, each run as one step on a fresh sequence;
// with `trim_to`, the sequence goes back to that length before the last.
Tensor alone(const Model& model, const std::vector<std::vector<int32_t>>& steps, int64_t trim_to = -1) {
  auto state = model.new_state(80);
  for (size_t i = 0; i + 1 < steps.size(); ++i) model.forward(steps[i], *state, false);
  if (trim_to >= 0) state->trim(trim_to);
  return model.forward(steps.back(), *state, true);
}

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

class SequenceFork : public ::testing::TestWithParam<std::string> {};

TEST_P(SequenceFork, ForksShareBlocksAndContinueExactly) {
  auto rng = testing::fresh_rng();
  for (const KvScheme& scheme : testing::kv_schemes_for(GetParam(), /*quantized_start=*/20)) {
    SCOPED_TRACE(scheme.cache_key());
    auto model = testing::load_fixture(GetParam(), scheme);
    const int64_t vocab = model->config().vocab_size;
    const auto a = testing::random_ids(37, vocab, rng), b = testing::random_ids(9, vocab, rng),
               c = testing::random_ids(13, vocab, rng);
    const int64_t used_before = model->kv_pool().used_blocks();
    {
      auto origin = model->new_state(60);
      model->forward(a, *origin, false);
      const int64_t held = model->kv_pool().used_blocks();
      auto fork = origin->fork(80);
      EXPECT_EQ(model->kv_pool().used_blocks(), held) << "a fork takes no blocks of its own";
      EXPECT_EQ(fork->length(), origin->length());
      // The fork writes first (into the block it shares), then the origin.
      EXPECT_TRUE(same(model->forward(c, *fork, true), alone(*model, {a, c})));
      EXPECT_TRUE(same(model->forward(b, *origin, true), alone(*model, {a, b})));

      // Back into a block the origin still reads, then on with other tokens.
      // Layers that cannot go back there (recurrent state, a window's
      // reused blocks) refuse the trim.
      auto trimmed = origin->fork(80);
      bool can_trim = true;
      try {
        trimmed->trim(40);
      } catch (const Error&) {
        can_trim = false;
      }
      const bool recurrent = std::any_of(origin->recurrent.begin(), origin->recurrent.end(),
                                         [](const auto& r) { return bool(r); });
      if (recurrent) {
        EXPECT_FALSE(can_trim);
      }
      if (!can_trim) {
        EXPECT_TRUE(recurrent || origin->max_step != INT64_MAX) << "only recurrent or sliding layers refuse";
      }
      if (can_trim) {
        EXPECT_TRUE(same(model->forward(c, *trimmed, true), alone(*model, {a, b, c}, 40)));
        EXPECT_TRUE(same(model->forward(c, *origin, true), alone(*model, {a, b, c})));
      }
    }
    EXPECT_EQ(model->kv_pool().used_blocks(), used_before) << "every block went back to the pool";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SequenceFork, ::testing::ValuesIn(testing::parity_fixtures()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fathom
