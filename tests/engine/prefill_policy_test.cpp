// The prefill policy and admission read the memory contract: a tight budget
// gets a smaller chunk instead of a refusal, and only what fits is admitted.
#include "engine/prefill_policy.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/admission.h"
#include "engine/memory_budget.h"

namespace fathom {
namespace {

const std::string kModel = std::string(FATHOM_FIXTURES_DIR) + "/parity/qwen3_untied_4layer";

MemoryContract contract() {
  return MemoryContract::for_model_dir(kModel, ComputeDType::f32, KvScheme::bf16(), 2);
}

TEST(PrefillPolicy, AGenerousBudgetGetsTheLargestChunk) {
  const MemoryContract c = contract();
  EXPECT_EQ(largest_fitting_chunk(c, int64_t(1) << 34, 4096), max_prefill_chunk(Device::cpu));
  const BudgetPrefillPolicy policy(c, int64_t(1) << 34);
  EXPECT_EQ(policy.chunk_size(100, 4096), 100);  // never longer than the prompt
  EXPECT_EQ(policy.chunk_size(5000, 6000), max_prefill_chunk(Device::cpu));
}

// A GPU's chunks go up to 2,048 (larger GEMMs pay there), billed as such.
TEST(PrefillPolicy, AGpuTakesLargerChunks) {
  const MemoryContract gpu = MemoryContract::for_model_dir(kModel, ComputeDType::bf16, KvScheme::bf16(), 1,
                                                           WeightResidence::mapped, Device::cuda);
  EXPECT_EQ(max_prefill_chunk(Device::cuda), 2048);
  EXPECT_EQ(largest_fitting_chunk(gpu, int64_t(1) << 34, 4096), 2048);
  EXPECT_EQ(BudgetPrefillPolicy(gpu, int64_t(1) << 34).chunk_size(5000, 6000), 2048);
  // A budget that holds a chunk of 1,000 but not of 2,048 gets the largest that fits.
  const int64_t budget = gpu.predict(4096, 1, 1000).total();
  const auto chunk = largest_fitting_chunk(gpu, budget, 4096);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_GE(*chunk, 1000);
  EXPECT_LT(*chunk, 2048);
  EXPECT_GT(gpu.predict(4096, 1, *chunk + 1).total(), budget);
}

TEST(PrefillPolicy, ATightBudgetGetsASmallerChunkThatFits) {
  const MemoryContract c = contract();
  const int64_t context = 2000;
  // A budget with room for a chunk of about 100 but not of 512.
  const int64_t budget = c.predict(context, 1, 100).total();
  const auto chunk = largest_fitting_chunk(c, budget, context);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_GE(*chunk, 100);
  EXPECT_LT(*chunk, max_prefill_chunk(Device::cpu));
  EXPECT_LE(c.predict(context, 1, *chunk).total(), budget);
  EXPECT_GT(c.predict(context, 1, *chunk + 1).total(), budget);  // the largest
  EXPECT_EQ(BudgetPrefillPolicy(c, budget).chunk_size(context - 10, context), *chunk);
  // Below the smallest useful chunk: nothing fits, and the policy falls back.
  const int64_t too_small = c.predict(context, 1, kMinPrefillChunk).total() - 1;
  EXPECT_FALSE(largest_fitting_chunk(c, too_small, context).has_value());
  EXPECT_EQ(BudgetPrefillPolicy(c, too_small).chunk_size(context - 10, context), kMinPrefillChunk);
}

TEST(PrefillPolicy, AForcedChunkIsKept) {
  EXPECT_EQ(FixedPrefillPolicy(7).chunk_size(100, 200), 7);
  EXPECT_EQ(FixedPrefillPolicy(7).chunk_size(3, 200), 3);
  EXPECT_EQ(planned_chunk(contract(), 1, 100, 1, 9), 9);
  EXPECT_THROW(FixedPrefillPolicy(0), Error);
}

TEST(Admission, ALongSequenceUnderATightBudgetIsAdmittedWithASmallerChunk) {
  const MemoryContract c = contract();
  const int64_t fixed = c.weights_bytes() + c.runtime_bytes();
  const int64_t tokens = 3000;
  // Room for this sequence with a chunk of 64, not with 512.
  const int64_t budget = fixed + c.kv_bytes(tokens, 64) + c.transient_bytes(64, tokens);
  ASSERT_GT(fixed + c.kv_bytes(tokens, 512) + c.transient_bytes(512, tokens), budget);
  const BudgetPrefillPolicy policy(c, budget);
  MemoryAdmission admission(c, policy, budget, fixed);
  EXPECT_TRUE(admission.fits_alone(tokens));
  EXPECT_LE(fixed + admission.sequence_bytes(tokens), budget);
  EXPECT_FALSE(admission.fits_alone(tokens + 200));
  const int64_t longest = admission.longest_sequence(100000);
  EXPECT_GE(longest, tokens);
  EXPECT_TRUE(admission.fits_alone(longest));
  EXPECT_FALSE(admission.fits_alone(longest + 1));
}

TEST(Admission, ChargesOnlyWhatFitsBesideTheAdmitted) {
  const MemoryContract c = contract();
  const int64_t fixed = c.weights_bytes() + c.runtime_bytes();
  const int64_t one = c.kv_bytes(500, 64) + c.transient_bytes(64, 500);
  const FixedPrefillPolicy policy(64);
  MemoryAdmission admission(c, policy, fixed + 2 * one + one / 2, fixed);
  EXPECT_EQ(admission.sequence_bytes(500), one);
  EXPECT_TRUE(admission.try_admit(one));
  EXPECT_TRUE(admission.try_admit(one));
  EXPECT_FALSE(admission.try_admit(one));  // the third waits
  EXPECT_EQ(admission.admitted(), 2 * one);
  admission.release(one);
  EXPECT_TRUE(admission.try_admit(one));  // and starts once memory frees
  EXPECT_EQ(admission.longest_sequence(0), 0);
}

TEST(FitMemory, LimitsAreTheLargestThatFit) {
  const MemoryContract c = contract();
  const int64_t budget = c.predict(300, 2, 512).total() + 1000;
  const FitAnswer a = fit_memory(c, 300, 2, budget);
  EXPECT_TRUE(a.fits);
  EXPECT_LE(c.predict(a.max_context, 2, planned_chunk(c, budget, a.max_context, 2, 0)).total(), budget);
  if (a.max_context < c.config().max_position_embeddings) {
    EXPECT_GT(c.predict(a.max_context + 1, 2, planned_chunk(c, budget, a.max_context + 1, 2, 0)).total(), budget);
  }
  EXPECT_GE(a.max_sequences, 2);
  EXPECT_LE(c.predict(300, a.max_sequences, planned_chunk(c, budget, 300, a.max_sequences, 0)).total(), budget);
  EXPECT_GT(c.predict(300, a.max_sequences + 1, planned_chunk(c, budget, 300, a.max_sequences + 1, 0)).total(),
            budget);
  const FitAnswer none = fit_memory(c, 300, 1, c.weights_bytes());
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.max_context, 0);
  EXPECT_EQ(none.max_sequences, 0);
}

}  // namespace
}  // namespace fathom
