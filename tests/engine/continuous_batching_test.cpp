// Continuous batching against running each request alone: sequences joining
// at different steps, prefill chunks beside decode rows and sequences leaving
// early give every sequence the tokens it gets alone, on every architecture
// fixture (f32), with plain, delayed-start affine and TurboQuant KV.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "engine/generator.h"
#include "engine/run_step.h"
#include "engine/sequence_run.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::load_fixture;

// Runs the requests in one continuous batch, request i joining at step i·stagger.
std::vector<GenerationResult> batched(const Model& model, const PrefillPolicy& policy,
                                      const std::vector<GenerationRequest>& requests, int64_t stagger,
                                      int64_t step_tokens) {
  std::vector<std::unique_ptr<SequenceRun>> runs;
  for (int64_t step = 0;; ++step) {
    while (int64_t(runs.size()) < int64_t(requests.size()) && int64_t(runs.size()) * stagger <= step)
      runs.push_back(std::make_unique<SequenceRun>(model, policy, requests[runs.size()]));
    std::vector<SequenceRun*> active;
    for (auto& r : runs) active.push_back(r.get());
    const bool ran = run_step(model, active, step_tokens);
    if (!ran && runs.size() == requests.size()) break;
  }
  std::vector<GenerationResult> out;
  for (auto& r : runs) {
    EXPECT_EQ(r->error(), "");
    out.push_back(r->result());
  }
  return out;
}

class ContinuousBatching : public ::testing::TestWithParam<std::string> {};

TEST_P(ContinuousBatching, EverySequenceGetsItsTokensAlone) {
  auto rng = testing::fresh_rng();
  for (const KvScheme& scheme : testing::kv_schemes_for(GetParam(), /*quantized_start=*/20)) {
    auto model = load_fixture(GetParam(), scheme);
    const int64_t vocab = model->config().vocab_size;
    // Prompts from 3 to 40 tokens (prefill chunks of 8 beside decode rows),
    // lengths from 5 to 14 (some leave while others still decode), one stopping at an id.
    std::vector<GenerationRequest> requests;
    for (const int64_t prompt : {23, 3, 40, 11}) {
      GenerationRequest r;
      r.prompt = testing::random_ids(prompt, vocab, rng);
      r.max_new_tokens = 5 + int64_t(rng() % 10);
      r.sampling.temperature = 0.0f;
      requests.push_back(r);
    }
    const FixedPrefillPolicy policy(8);
    std::vector<GenerationResult> alone;
    for (const auto& r : requests) alone.push_back(generate(*model, policy, r));
    requests[1].stop_ids = {alone[1].ids[2]};  // stops after its third token
    alone[1] = generate(*model, policy, requests[1]);
    for (const int64_t stagger : {0, 1, 3}) {
      const auto together = batched(*model, policy, requests, stagger, /*step_tokens=*/20);
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(together[i].ids, alone[i].ids)
            << GetParam() << ", " << scheme.cache_key() << ", stagger " << stagger << ", request " << i;
        EXPECT_EQ(together[i].finish_reason, alone[i].finish_reason);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ContinuousBatching, ::testing::ValuesIn(testing::parity_fixtures()));

TEST(ContinuousBatching, SampledSequencesKeepTheirOwnDraws) {
  auto model = load_fixture("qwen3_untied_4layer");
  auto rng = testing::fresh_rng();
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 4; ++i) {
    GenerationRequest r;
    r.prompt = testing::random_ids(6 + 9 * i, model->config().vocab_size, rng);
    r.max_new_tokens = 16;
    r.sampling = {.temperature = 1.0f, .top_p = 0.95f, .seed = rng()};
    requests.push_back(r);
  }
  const FixedPrefillPolicy policy(8);
  std::vector<GenerationResult> alone;
  for (const auto& r : requests) alone.push_back(generate(*model, policy, r));
  // Steps of at most 16 rows compute each row as decode does (bit for bit),
  // so even draws from a flat tail land where they land alone; larger steps
  // change the logits' last bits, which greedy tokens survive but such draws may not.
  const auto together = batched(*model, FixedPrefillPolicy(16), requests, 2, 16);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(together[i].ids, alone[i].ids) << "request " << i;
}

// A step of 16 runs or more samples its rows across the thread pool before
// absorbing them in order: each run draws what sampling its row on this
// thread draws. The same 20 sampled requests go through run_step and through
// the same steps absorbed one run at a time; both compute the same logits.
TEST(ContinuousBatching, RowsSampledAcrossThreadsDrawWhatOneThreadDraws) {
  auto model = load_fixture("qwen3_untied_4layer");
  auto rng = testing::fresh_rng();
  const FixedPrefillPolicy policy(64);
  std::vector<std::unique_ptr<SequenceRun>> pooled, alone;
  for (int i = 0; i < 20; ++i) {
    GenerationRequest r;
    r.prompt = testing::random_ids(3 + i % 5, model->config().vocab_size, rng);
    r.max_new_tokens = 6 + i % 4;  // some leave while the others go on
    r.sampling = {.temperature = 1.0f, .top_p = 0.95f, .seed = rng()};
    pooled.push_back(std::make_unique<SequenceRun>(*model, policy, r));
    alone.push_back(std::make_unique<SequenceRun>(*model, policy, r));
  }
  std::vector<SequenceRun*> pooled_runs, alone_runs;
  for (auto& r : pooled) pooled_runs.push_back(r.get());
  for (auto& r : alone) alone_runs.push_back(r.get());
  while (run_step(*model, pooled_runs, 4096)) {
  }
  int64_t widest = 0;
  for (;;) {  // run_step's plan and absorb, without sample_ahead
    std::vector<SequenceStep> step;
    std::vector<SequenceRun*> planned;
    for (const bool decoding : {true, false})
      for (SequenceRun* run : alone_runs)
        if (!run->finished() && run->prefilling() != decoding)
          if (auto part = run->plan(decoding ? 0 : 4096)) {
            step.push_back(std::move(*part));
            planned.push_back(run);
          }
    if (step.empty()) break;
    widest = std::max(widest, int64_t(step.size()));
    const StepOutput out = model->forward(step);
    int64_t row = 0, pick = 0;
    for (size_t i = 0; i < planned.size(); ++i) {
      planned[i]->absorb(out, row, pick);
      row += step[i].logit_rows();
      pick += step[i].picks();
    }
  }
  EXPECT_EQ(widest, 20);
  for (size_t i = 0; i < pooled.size(); ++i) {
    EXPECT_EQ(pooled[i]->error(), "");
    EXPECT_EQ(pooled[i]->result().ids, alone[i]->result().ids) << "request " << i;
  }
}

// A greedy run, or one sampled by temperature, min-p or top-p, takes its
// tokens as the step's picks unless on_token reads logits; either way it
// emits the same tokens (the same seeded draws), and on_token sees logits
// exactly when it asked for them. A repetition penalty is the host's: its
// rows always come back.
TEST(ContinuousBatching, RunsTakePicksUnlessTheirLogitsAreRead) {
  auto model = load_fixture("qwen3_untied_4layer");
  auto rng = testing::fresh_rng();
  const FixedPrefillPolicy policy(4);
  const size_t vocab = size_t(model->config().vocab_size);
  GenerationRequest r;
  r.prompt = testing::random_ids(9, model->config().vocab_size, rng);  // prefilled in three chunks
  r.max_new_tokens = 7;
  const SamplingParams greedy{.temperature = 0.0f}, sampled{.temperature = 1.5f, .min_p = 0.02f, .seed = rng()},
      top_p{.temperature = 1.5f, .top_p = 0.9f, .seed = rng()},
      penalized{.temperature = 1.5f, .repetition_penalty = 1.3f, .seed = rng()};
  for (const SamplingParams& sampling : {greedy, sampled, top_p, penalized}) {
    SCOPED_TRACE("temperature " + std::to_string(sampling.temperature) + ", top_p " + std::to_string(sampling.top_p));
    r.sampling = sampling;
    std::vector<GenerationResult> results;
    for (const bool token_logits : {true, false}) {
      r.token_logits = token_logits;
      std::vector<size_t> sizes;
      results.push_back(generate(*model, policy, r, [&](const GeneratedToken& t) {
        sizes.push_back(t.logits.size());
        return true;
      }));
      ASSERT_EQ(sizes.size(), 7u);
      const bool picks = !token_logits && sampling.repetition_penalty == 1.0f;
      for (const size_t n : sizes) EXPECT_EQ(n, picks ? 0u : vocab);
    }
    EXPECT_EQ(results[0].ids, results[1].ids);
  }
  // Sampled at a temperature this high, the seeded draws are not the greedy tokens.
  r.token_logits = false;
  r.sampling = greedy;
  const GenerationResult g = generate(*model, policy, r);
  r.sampling = sampled;
  EXPECT_NE(generate(*model, policy, r).ids, g.ids);
}

// Prompt lookup, or else the last token repeated: every step drafts, right or wrong.
class LookupOrRepeat final : public Drafter {
 public:
  Draft propose(const std::vector<int32_t>& history, int64_t max, Sampler& sampler) override {
    Draft d = lookup_.propose(history, max, sampler);
    if (d.tokens.empty()) d.tokens.assign(size_t(max), history.back());
    return d;
  }
  double relative_cost() const override { return 0.0; }
  std::unique_ptr<Drafter> fork() const override { return std::make_unique<LookupOrRepeat>(); }

 private:
  NgramDrafter lookup_;
};

// Speculative runs in one batch: each verify span is its own sequence's
// segment and each resolves its own acceptance; greedy output stays each
// sequence's output alone (on a hybrid model too, whose recurrent layers keep
// per-position states inside the batch).
TEST(ContinuousBatching, SpeculativeRunsInOneBatch) {
  for (const char* fixture : {"qwen3_untied_4layer", "qwen3_5_text", "gemma3_sliding"}) {
    auto model = load_fixture(fixture);
    auto rng = testing::fresh_rng();
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < 3; ++i) {
      GenerationRequest r;
      // Repeated phrases, so prompt lookup finds drafts (some right, some wrong).
      const auto phrase = testing::random_ids(4 + i, model->config().vocab_size, rng);
      for (int k = 0; k < 4; ++k) r.prompt.insert(r.prompt.end(), phrase.begin(), phrase.end());
      r.max_new_tokens = 16;
      r.sampling.temperature = 0.0f;
      requests.push_back(r);
    }
    const FixedPrefillPolicy policy(8);
    std::vector<GenerationResult> alone;
    for (const auto& r : requests) alone.push_back(generate(*model, policy, r));
    std::vector<LookupOrRepeat> drafters(requests.size());
    std::vector<std::unique_ptr<SequenceRun>> runs;
    std::vector<SequenceRun*> active;
    for (size_t i = 0; i < requests.size(); ++i) {
      runs.push_back(std::make_unique<SequenceRun>(*model, policy, requests[i], SequenceRun::OnToken{},
                                                   Speculation{&drafters[i], 4, /*adaptive=*/false}));
      active.push_back(runs.back().get());
    }
    while (run_step(*model, active, 64)) {
    }
    int64_t drafted = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(runs[i]->error(), "") << fixture;
      EXPECT_EQ(runs[i]->result().ids, alone[i].ids) << fixture << ", request " << i;
      drafted += runs[i]->result().spec.drafted;
    }
    EXPECT_GT(drafted, 0) << fixture;
  }
}

// A conversation's next turn resumes the last run's sequence: only what
// differs from the held tokens is prefilled, and the output is the output of a
// fresh run. Layers that cannot go back (recurrent state) start over when the
// new prompt leaves the held tokens, and keep them when it only extends them.
TEST(HeldSequence, TheNextTurnPrefillsOnlyWhatChanged) {
  for (const char* fixture : {"qwen3_untied_4layer", "gemma3_sliding", "qwen3_5_text"}) {
    auto model = load_fixture(fixture);
    auto rng = testing::fresh_rng();
    const int64_t vocab = model->config().vocab_size;
    const FixedPrefillPolicy policy(8);
    auto run_once = [&](const GenerationRequest& r, HeldSequence* held, int64_t* reused) {
      SequenceRun run(*model, policy, r, {}, {}, held);
      SequenceRun* const runs[] = {&run};
      while (!run.finished()) run_step(*model, runs, step_tokens(*model));
      EXPECT_EQ(run.error(), "");
      if (reused) *reused = run.reused_tokens();
      return run.result().ids;
    };
    GenerationRequest first;
    first.prompt = testing::random_ids(20, vocab, rng);
    first.max_new_tokens = 6;
    first.sampling.temperature = 0.0f;
    first.capacity = 64;
    HeldSequence held;
    const auto answer = run_once(first, &held, nullptr);
    ASSERT_TRUE(held.state) << fixture;
    EXPECT_EQ(int64_t(held.tokens.size()), 20 + 6 - 1) << "the last token was never fed";

    // The next turn: the whole first turn, then new tokens.
    GenerationRequest next = first;
    next.prompt.insert(next.prompt.end(), answer.begin(), answer.end());
    const auto more = testing::random_ids(5, vocab, rng);
    next.prompt.insert(next.prompt.end(), more.begin(), more.end());
    int64_t reused = 0;
    HeldSequence kept = std::move(held);
    const auto resumed = run_once(next, &kept, &reused);
    EXPECT_EQ(resumed, run_once(next, nullptr, nullptr)) << fixture;
    EXPECT_EQ(reused, 25) << fixture << ": every held token";

    // A turn that leaves the held tokens (an edited message): KV layers trim back,
    // recurrent ones start over; the output is still a fresh run's.
    GenerationRequest edited = next;
    edited.prompt[10] = (edited.prompt[10] + 1) % int32_t(vocab);
    const auto after_edit = run_once(edited, &kept, &reused);
    EXPECT_EQ(after_edit, run_once(edited, nullptr, nullptr)) << fixture;
    const bool recurrent = std::string(fixture) == "qwen3_5_text";
    EXPECT_EQ(reused, recurrent ? 0 : 10) << fixture;
  }
}

TEST(ContinuousBatching, AStoppedRunLeavesAndTheOthersGoOn) {
  auto model = load_fixture("qwen3_untied_4layer");
  auto rng = testing::fresh_rng();
  GenerationRequest a, b;
  a.prompt = testing::random_ids(30, model->config().vocab_size, rng);
  b.prompt = testing::random_ids(5, model->config().vocab_size, rng);
  a.max_new_tokens = b.max_new_tokens = 12;
  a.sampling.temperature = b.sampling.temperature = 0.0f;
  const FixedPrefillPolicy policy(8);
  const GenerationResult b_alone = generate(*model, policy, b);
  SequenceRun ra(*model, policy, a), rb(*model, policy, b);
  SequenceRun* const runs[] = {&ra, &rb};
  ASSERT_TRUE(run_step(*model, runs, 10));  // a's first chunk, b's whole prompt... within 10 tokens
  EXPECT_TRUE(ra.prefilling());
  ra.stop("cancelled");  // mid-prefill
  EXPECT_TRUE(ra.finished());
  EXPECT_EQ(ra.state_bytes(), 0);
  while (run_step(*model, runs, 10)) {
  }
  EXPECT_EQ(ra.result().finish_reason, "cancelled");
  EXPECT_EQ(rb.result().ids, b_alone.ids);
}

}  // namespace
}  // namespace fathom
