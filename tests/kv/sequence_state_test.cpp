// The speculative transaction on whole hybrid models (the Qwen3.5 and
// Qwen3-Next fixtures): a verify step resolved to `kept` leaves every layer
// exactly as decoding the kept tokens one at a time would, with nothing to run
// again; the step's extra bytes are counted while it is open and gone after.
#include "kv/sequence_state.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "model/model.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;
using testing::random_ids;

std::unique_ptr<Model> load(const std::string& fixture, ComputeDType dtype) {
  LoadOptions o;
  o.dtype = dtype;
  return load_model((fs::path(FATHOM_FIXTURES_DIR) / "parity" / fixture).string(), o);
}

// Bit for bit where the model's step is batch-invariant: a verify step runs the
// recurrence token by token as decode does and its matmuls and attention take
// decode's arithmetic per row, so the kept positions are computed exactly as
// decoding them one at a time computes them. The Qwen3-Next fixture's shared
// expert is 40 wide: a decode row's last 8 SiLU inputs fall on the vector
// kernel's scalar tail, but in a multi-row step they sit inside a 16-wide
// vector (elementwise kernels run over the whole [rows, 40] buffer), so its
// MLP output differs from decode's in the last bits and only a tolerance
// holds there (real models' widths are multiples of 16). The recurrent state
// machinery alone is held bit for bit in tests/model/gated_deltanet_test.cpp,
// with the tolerance against a chunked prefill of the same tokens.
struct Case {
  const char* fixture;
  bool bitwise;
};

void expect_same(const float* a, const float* b, int64_t n, bool bitwise, const std::string& what) {
  if (bitwise) EXPECT_EQ(std::memcmp(a, b, size_t(n) * sizeof(float)), 0) << what;
  else EXPECT_LT(testing::relative_error(a, b, n), 1e-5) << what;
}

TEST(SequenceStateTransaction, AResolvedStepEqualsDecodingTheKeptTokens) {
  for (const Case c : {Case{"qwen3_5_text", true}, Case{"qwen3_5_nested", true}, Case{"qwen3_next_moe", false}}) {
    for (ComputeDType dtype : {ComputeDType::f32, ComputeDType::bf16}) {
      SCOPED_TRACE(std::string(c.fixture) + (dtype == ComputeDType::bf16 ? " bf16" : " f32"));
      auto model = load(c.fixture, dtype);
      auto rng = testing::fresh_rng();
      const int64_t prompt = 7, rows = 5, vocab = model->config().vocab_size;
      const auto ids = random_ids(prompt + rows + 1, vocab, rng);
      const std::vector<int32_t> head(ids.begin(), ids.begin() + prompt), step(ids.begin() + prompt, ids.end() - 1);
      // The plain run: the prompt, then the step's tokens decoded one at a time.
      auto plain = model->new_state(32);
      model->forward(head, *plain, false);
      std::vector<Tensor> decoded;  // logits of each decoded row
      for (int32_t id : step) decoded.push_back(model->forward({id}, *plain, false));
      for (int64_t kept = 1; kept <= rows; ++kept) {
        SCOPED_TRACE("kept " + std::to_string(kept));
        auto reference = model->new_state(32);
        model->forward(head, *reference, false);
        for (int64_t i = 0; i < kept; ++i) model->forward({step[size_t(i)]}, *reference, false);

        auto spec = model->new_state(32);
        model->forward(head, *spec, false);
        const int64_t committed = spec->bytes();
        spec->begin(rows);
        const Tensor verify = model->forward(step, *spec, /*all_logits=*/true);
        EXPECT_GT(spec->bytes(), committed);  // the per-position matrices
        for (int64_t r = 0; r < rows; ++r)
          expect_same(verify.data<float>() + r * vocab, decoded[size_t(r)].data<float>(), vocab, c.bitwise,
                      "verify row " + std::to_string(r));
        spec->resolve(kept);
        EXPECT_FALSE(spec->in_transaction());
        EXPECT_EQ(spec->length(), prompt + kept);
        EXPECT_EQ(spec->bytes(), reference->bytes());
        for (size_t l = 0; l < spec->recurrent.size(); ++l) {
          if (!spec->recurrent[l]) continue;
          const RecurrentState &got = *spec->recurrent[l], &want = *reference->recurrent[l];
          const std::string layer = "layer " + std::to_string(l);
          EXPECT_FALSE(got.in_step()) << layer;
          EXPECT_EQ(got.length, want.length) << layer;
          expect_same(got.matrix.data<float>(), want.matrix.data<float>(), got.matrix.numel(), c.bitwise,
                      layer + " matrix");
          expect_same(got.conv.data<float>(), want.conv.data<float>(), got.conv.numel(), c.bitwise, layer + " conv");
        }
        const Tensor a = model->forward({ids.back()}, *spec, false), b = model->forward({ids.back()}, *reference, false);
        expect_same(a.data<float>(), b.data<float>(), vocab, c.bitwise, "the next token's logits");
      }
    }
  }
}

TEST(SequenceStateTransaction, AFailedResolveDropsTheStepsCopies) {
  auto model = load("qwen3_5_text", ComputeDType::f32);
  auto state = model->new_state(20);
  const int64_t empty = state->bytes();
  EXPECT_THROW(state->resolve(1), Error);  // no transaction open
  EXPECT_FALSE(state->valid());
  EXPECT_EQ(state->bytes(), empty);

  state = model->new_state(20);
  model->forward({1, 2, 3}, *state, false);
  state->begin(4);
  model->forward({4, 5, 6}, *state, true);  // one row short of the step
  EXPECT_THROW(state->resolve(2), Error);
  EXPECT_FALSE(state->valid());
  EXPECT_EQ(state->length(), 0);
  EXPECT_EQ(state->bytes(), empty);
  for (const auto& r : state->recurrent) {
    if (r) {
      EXPECT_FALSE(r->in_step());
    }
  }
  EXPECT_THROW(model->forward({7}, *state, false), Error);
}

TEST(SequenceStateTransaction, ARecurrentStateStillCannotBeTrimmed) {
  auto model = load("qwen3_5_text", ComputeDType::f32);
  auto state = model->new_state(20);
  model->forward({1, 2, 3, 4}, *state, false);
  state->begin(2);
  EXPECT_THROW(state->trim(2), Error);  // not inside a transaction
  model->forward({5, 6}, *state, true);
  state->resolve(1);
  EXPECT_THROW(state->trim(3), Error);  // recurrent layers only go back to 0
  state->trim(0);
  EXPECT_EQ(state->length(), 0);
}

}  // namespace
}  // namespace fathom
