// One forward step over many sequences against each sequence run alone, on
// every architecture fixture (f32): sequences joining while others decode,
// prefill chunks beside decode rows, every kind of logits request, and runs
// longer than a sliding window's step split across steps.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "model/model.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;
const fs::path kParityDir = fs::path(FATHOM_FIXTURES_DIR) / "parity";

std::unique_ptr<Model> load(const std::string& fixture, int64_t sliding_step = kSlidingStepTokens) {
  LoadOptions o;
  o.sliding_step = sliding_step;
  return load_model((kParityDir / fixture).string(), o);
}

// The logits a sequence gets running alone: `chunks` fed one forward each, the last row of each.
std::vector<Tensor> alone(const Model& model, const std::vector<std::vector<int32_t>>& chunks, int64_t capacity) {
  auto state = model.new_state(capacity);
  std::vector<Tensor> out;
  for (const auto& chunk : chunks) out.push_back(model.forward(chunk, *state, false));
  return out;
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  EXPECT_LT(testing::relative_error(got.data<float>(), want.data<float>(), got.numel()), 1e-5) << what;
}

class BatchedForward : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchedForward, EverySequenceGetsWhatItGetsAlone) {
  auto model = load(GetParam());
  const int64_t vocab = model->config().vocab_size;
  auto rng = testing::fresh_rng();
  std::mt19937 ids_rng{uint32_t(rng())};
  // A: a long prompt, then decode; B: a short prompt, then decode; C joins at
  // step 2 with its prompt in two chunks while A and B decode.
  const auto a_prompt = testing::random_ids(19, vocab, ids_rng), b_prompt = testing::random_ids(4, vocab, ids_rng);
  const auto c1 = testing::random_ids(7, vocab, ids_rng), c2 = testing::random_ids(6, vocab, ids_rng);
  const auto decode = testing::random_ids(12, vocab, ids_rng);
  const int64_t capacity = 48;

  std::vector<std::vector<int32_t>> a_chunks = {a_prompt}, b_chunks = {b_prompt}, c_chunks = {c1, c2};
  for (int i = 0; i < 4; ++i) {
    a_chunks.push_back({decode[size_t(i)]});
    b_chunks.push_back({decode[size_t(4 + i)]});
  }
  c_chunks.push_back({decode[8]});
  c_chunks.push_back({decode[9]});
  const auto a_ref = alone(*model, a_chunks, capacity), b_ref = alone(*model, b_chunks, capacity);
  const auto c_ref = alone(*model, c_chunks, capacity);

  auto a = model->new_state(capacity), b = model->new_state(capacity), c = model->new_state(capacity);
  const int64_t step_count = 5;
  for (int64_t step = 0; step < step_count; ++step) {
    std::vector<SequenceStep> batch = {{a.get(), a_chunks[size_t(step)], WantLogits::last},
                                       {b.get(), b_chunks[size_t(step)], WantLogits::last}};
    const int64_t c_at = step - 1;  // C's chunk in this step, from step 1
    if (c_at >= 0 && c_at < int64_t(c_chunks.size()))
      batch.push_back({c.get(), c_chunks[size_t(c_at)], c_at == 0 ? WantLogits::none : WantLogits::last});
    const Tensor logits = model->forward(batch).logits;
    const int64_t expected_rows = 2 + (c_at >= 1 && c_at < int64_t(c_chunks.size()) ? 1 : 0);
    ASSERT_EQ(logits.dim(0), expected_rows) << "step " << step;
    const std::string at = GetParam() + ", step " + std::to_string(step);
    expect_close(logits.slice_rows(0, 1), a_ref[size_t(step)], at + ", A");
    expect_close(logits.slice_rows(1, 2), b_ref[size_t(step)], at + ", B");
    if (expected_rows == 3) expect_close(logits.slice_rows(2, 3), c_ref[size_t(c_at)], at + ", C");
  }
  EXPECT_EQ(a->length(), 19 + 4);
  EXPECT_EQ(c->length(), 7 + 6 + 2);
}

TEST_P(BatchedForward, AllLogitsAndStepsSplitAtTheSlidingStep) {
  // A sliding step of 4 makes a 10-token run three steps on sliding models
  // (and one on the others); all rows' logits come back in order either way.
  auto model = load(GetParam(), /*sliding_step=*/4);
  const int64_t vocab = model->config().vocab_size;
  auto rng = testing::fresh_rng();
  std::mt19937 ids_rng{uint32_t(rng())};
  const auto a_ids = testing::random_ids(10, vocab, ids_rng), b_ids = testing::random_ids(3, vocab, ids_rng);
  auto ref_a = model->new_state(16), ref_b = model->new_state(16);
  const Tensor a_all = model->forward(a_ids, *ref_a, true), b_last = model->forward(b_ids, *ref_b, false);

  auto a = model->new_state(16), b = model->new_state(16);
  const std::vector<SequenceStep> batch = {{a.get(), a_ids, WantLogits::all}, {b.get(), b_ids, WantLogits::last}};
  const Tensor logits = model->forward(batch).logits;
  ASSERT_EQ(logits.dim(0), 11);
  expect_close(logits.slice_rows(0, 10), a_all, GetParam() + ", A all rows");
  expect_close(logits.slice_rows(10, 11), b_last, GetParam() + ", B last row");
  EXPECT_EQ(a->length(), 10);
  EXPECT_EQ(b->length(), 3);
}

// A pick is the greedy choice of the row it stands for: that row's argmax,
// or, where its best two logits are within rounding of each other (the
// batched row and the row alone differ by rounding), either of them.
void expect_pick(int32_t pick, const Tensor& row, const std::string& what) {
  const float* x = row.data<float>();
  const int32_t best = cpu::argmax({x, size_t(row.numel())});
  if (pick == best) return;
  ASSERT_GE(pick, 0) << what;
  ASSERT_LT(pick, row.numel()) << what;
  EXPECT_GE(x[pick], x[best] - 1e-4f * std::max(1.0f, std::fabs(x[best]))) << what << ": picked " << pick
                                                                             << ", the best is " << best;
}

TEST_P(BatchedForward, PicksAreTheGreedyChoiceOfTheirRows) {
  // Picks beside whole rows in one step, of a last row and of every row,
  // some from runs split across steps at the sliding step: each pick is its
  // row's greedy choice, the whole rows come back in order without the
  // picked ones.
  auto model = load(GetParam(), /*sliding_step=*/4);
  const int64_t vocab = model->config().vocab_size;
  auto rng = testing::fresh_rng();
  std::mt19937 ids_rng{uint32_t(rng())};
  std::vector<std::vector<int32_t>> ids;
  for (const int64_t n : {10, 3, 5, 2, 9}) ids.push_back(testing::random_ids(n, vocab, ids_rng));
  std::vector<Tensor> ref;
  for (const auto& run : ids) {
    auto state = model->new_state(16);
    ref.push_back(model->forward(run, *state, true));
  }
  std::vector<std::unique_ptr<SequenceState>> states;
  for (size_t i = 0; i < ids.size(); ++i) states.push_back(model->new_state(16));
  const std::vector<SequenceStep> batch = {{states[0].get(), ids[0], WantLogits::pick},
                                           {states[1].get(), ids[1], WantLogits::last},
                                           {states[2].get(), ids[2], WantLogits::pick},
                                           {states[3].get(), ids[3], WantLogits::all},
                                           {states[4].get(), ids[4], WantLogits::pick_all}};
  const StepOutput out = model->forward(batch);
  ASSERT_EQ(out.picks.numel(), 2 + 9);
  ASSERT_EQ(out.logits.dim(0), 1 + 2);
  expect_pick(out.picks.data<int32_t>()[0], ref[0].slice_rows(9, 10), GetParam() + ", A (split)");
  expect_pick(out.picks.data<int32_t>()[1], ref[2].slice_rows(4, 5), GetParam() + ", C");
  for (int64_t r = 0; r < 9; ++r)
    expect_pick(out.picks.data<int32_t>()[2 + r], ref[4].slice_rows(r, r + 1), GetParam() + ", E, row " +
                                                                                  std::to_string(r));
  expect_close(out.logits.slice_rows(0, 1), ref[1].slice_rows(2, 3), GetParam() + ", B last row");
  expect_close(out.logits.slice_rows(1, 3), ref[3], GetParam() + ", D all rows");
  EXPECT_EQ(states[0]->length(), 10);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchedForward, ::testing::ValuesIn(testing::parity_fixtures()));

TEST(BatchedForwardErrors, ABadStepIsRefusedWholeBeforeAnyStateChanges) {
  auto model = load("qwen3_untied_4layer");
  auto a = model->new_state(8), b = model->new_state(8);
  const std::vector<int32_t> ids = {1, 2, 3};
  auto refused = [&](std::vector<SequenceStep> batch, const std::string& why) {
    EXPECT_THROW(model->forward(batch), Error) << why;
    EXPECT_EQ(a->length(), 0) << why;
    EXPECT_EQ(b->length(), 0) << why;
  };
  refused({{a.get(), ids}, {a.get(), ids}}, "one state twice");
  refused({{a.get(), ids}, {b.get(), {}}}, "no tokens");
  refused({{a.get(), ids}, {nullptr, ids}}, "no state");
  refused({{a.get(), ids}, {b.get(), {1, 2, 3, 4, 5, 6, 7, 8, 9}}}, "past the capacity");
  refused({{a.get(), ids}, {b.get(), {1, int32_t(model->config().vocab_size)}}}, "an id out of range");
  EXPECT_THROW(model->forward(std::span<const SequenceStep>()), Error);
}

}  // namespace
}  // namespace fathom
