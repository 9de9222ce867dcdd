// The prefix cache: a request whose prompt shares a prefix with a finished
// one starts from a fork of it, prefills only the rest and answers as a fresh
// run does, on dense, sliding-window and hybrid fixtures under every KV
// scheme; recurrent layers reuse only a sequence the prompt extends; the
// cache stays within its bytes; every block goes back to the pool.
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/run_step.h"
#include "test_util.h"

namespace fathom {
namespace {

struct Answer {
  std::vector<int32_t> ids;
  int64_t reused = 0;
};

// Runs one request alone; with a cache, starts from its best fork, keeps
// checkpoints along the prefill (as the server does after each step) and the
// sequence after.
Answer run(const Model& model, const GenerationRequest& request, PrefixCache* cache, int64_t chunk = 8) {
  HeldSequence held;
  if (cache)
    if (auto fork = cache->lookup(request.prompt, sequence_capacity(request))) held = std::move(*fork);
  const FixedPrefillPolicy policy(chunk);
  Answer answer;
  {
    SequenceRun r(model, policy, request, {}, {}, &held);
    SequenceRun* const runs[] = {&r};
    int64_t checkpointed = 0;
    while (!r.finished()) {
      run_step(model, runs, step_tokens(model));
      if (cache && r.prefill_state()) cache->checkpoint(*r.prefill_state(), r.prompt(), checkpointed);
    }
    EXPECT_EQ(r.error(), "");
    answer = {r.result().ids, r.reused_tokens()};
  }
  if (cache) cache->insert(std::move(held));
  return answer;
}

class PrefixCacheOnFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefixCacheOnFixtures, SharedPrefixesAreNotPrefilledAgain) {
  auto rng = testing::fresh_rng();
  for (const KvScheme& scheme : testing::kv_schemes_for(GetParam(), /*quantized_start=*/20)) {
    SCOPED_TRACE(scheme.cache_key());
    auto model = testing::load_fixture(GetParam(), scheme);
    const int64_t vocab = model->config().vocab_size;
    const bool recurrent = model->config().linear_attention.has_value();
    const auto system = testing::random_ids(40, vocab, rng);
    auto request = [&](std::vector<int32_t> prompt) {
      GenerationRequest r;
      r.prompt = std::move(prompt);
      r.max_new_tokens = 5;
      r.sampling.temperature = 0.0f;
      return r;
    };
    auto with = [](std::vector<int32_t> a, const std::vector<int32_t>& b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    {
      PrefixCache cache(int64_t(1) << 30);
      auto first_user = testing::random_ids(7, vocab, rng), second_user = testing::random_ids(9, vocab, rng);
      second_user[0] = (first_user[0] + 1) % int32_t(vocab);  // the prompts part right after the system prompt
      const GenerationRequest first = request(with(system, first_user)), second = request(with(system, second_user));
      EXPECT_EQ(run(*model, first, &cache).reused, 0) << "an empty cache";
      EXPECT_EQ(cache.entries(), 1);

      const Answer shared = run(*model, second, &cache);
      EXPECT_EQ(shared.ids, run(*model, second, nullptr).ids);
      // A recurrent state cannot go back to the end of the system prompt.
      EXPECT_EQ(shared.reused, recurrent ? 0 : 40);

      // The next turn of the first conversation extends its whole sequence.
      const GenerationRequest next = request(with(with(first.prompt, run(*model, first, nullptr).ids),
                                                  testing::random_ids(4, vocab, rng)));
      const Answer resumed = run(*model, next, &cache);
      EXPECT_EQ(resumed.ids, run(*model, next, nullptr).ids);
      EXPECT_EQ(resumed.reused, int64_t(first.prompt.size()) + 5 - 1) << "every token the first run held";
      EXPECT_LE(cache.bytes(), cache.max_bytes());
    }
    EXPECT_EQ(model->kv_pool().used_blocks(), 0) << "the cache and its forks gave every block back";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PrefixCacheOnFixtures,
                         ::testing::Values("qwen3_untied_4layer", "gemma3_sliding", "qwen3_5_text"),
                         [](const auto& info) { return info.param; });

// A hybrid model's state cannot go back, so a long prompt is kept at
// checkpoints along its prefill: another prompt sharing its first 600 tokens
// starts from the checkpoint at 512.
TEST(PrefixCache, HybridPromptsResumeFromPrefillCheckpoints) {
  auto model = testing::load_fixture("qwen3_5_text");
  auto rng = testing::fresh_rng();
  const int64_t vocab = model->config().vocab_size;
  const auto system = testing::random_ids(600, vocab, rng);
  auto request = [&](int32_t user) {
    GenerationRequest r;
    r.prompt = system;
    r.prompt.push_back(user);
    r.prompt.push_back(user);
    r.max_new_tokens = 4;
    r.sampling.temperature = 0.0f;
    return r;
  };
  PrefixCache cache(int64_t(1) << 30);
  EXPECT_EQ(run(*model, request(1), &cache, 256).reused, 0);
  EXPECT_EQ(cache.entries(), 2) << "a checkpoint at 512 tokens and the finished sequence";
  const GenerationRequest other = request(2);
  const Answer resumed = run(*model, other, &cache, 256);
  EXPECT_EQ(resumed.reused, PrefixCache::kCheckpointTokens);
  EXPECT_EQ(resumed.ids, run(*model, other, nullptr, 256).ids);
}

TEST(PrefixCache, StaysWithinItsBytesDroppingTheLeastRecentlyUsed) {
  auto model = testing::load_fixture("qwen3_untied_4layer");
  auto rng = testing::fresh_rng();
  auto sequence = [&](int64_t n) {
    HeldSequence s;
    s.tokens = testing::random_ids(n, model->config().vocab_size, rng);
    s.state = model->new_state(n + 1);
    model->forward(s.tokens, *s.state, false);
    return s;
  };
  HeldSequence a = sequence(40), b = sequence(40), c = sequence(40);
  const auto a_tokens = a.tokens, b_tokens = b.tokens, c_tokens = c.tokens;
  const int64_t one = a.state->bytes();
  PrefixCache cache(2 * one);
  cache.insert(std::move(a));
  cache.insert(std::move(b));
  EXPECT_EQ(cache.entries(), 2);
  // A lookup serves the entry sharing the longest prefix: a random prompt
  // may share its first token with another entry, so check which one served.
  const auto served = [&](const std::vector<int32_t>& tokens) {
    const auto fork = cache.lookup(tokens, 64);
    return fork && fork->tokens == tokens;
  };
  ASSERT_TRUE(served(a_tokens)) << "a is used again, so b is the least recently used";
  cache.insert(std::move(c));
  EXPECT_EQ(cache.entries(), 2);
  EXPECT_LE(cache.bytes(), 2 * one);
  EXPECT_TRUE(served(a_tokens));
  EXPECT_TRUE(served(c_tokens));
  EXPECT_FALSE(served(b_tokens)) << "b was dropped";

  PrefixCache tiny(one - 1);
  tiny.insert(sequence(40));
  EXPECT_EQ(tiny.entries(), 0) << "a sequence larger than the cache is not kept";
}

TEST(PrefixCache, AnEntryLongerThanTheRequestGivesWayToAShorterOne) {
  // The longest shared prefix sits in an entry holding more tokens than the
  // request may: the lookup forks the next-best entry instead of none.
  auto model = testing::load_fixture("qwen3_untied_4layer");
  auto rng = testing::fresh_rng();
  const auto prompt = testing::random_ids(30, model->config().vocab_size, rng);
  auto held = [&](const std::vector<int32_t>& tokens) {
    HeldSequence s;
    s.tokens = tokens;
    s.state = model->new_state(int64_t(tokens.size()));
    model->forward(s.tokens, *s.state, false);
    return s;
  };
  std::vector<int32_t> long_one(prompt.begin(), prompt.begin() + 25);  // shares 25 tokens, holds 60
  const auto tail = testing::random_ids(35, model->config().vocab_size, rng);
  long_one.insert(long_one.end(), tail.begin(), tail.end());
  // Shares 10 tokens, holds 15 (it goes its own way after them, so the long
  // entry does not extend it and both stay).
  std::vector<int32_t> short_one(prompt.begin(), prompt.begin() + 10);
  for (int32_t id : testing::random_ids(5, model->config().vocab_size, rng)) short_one.push_back(id);
  short_one[10] = prompt[10] + 1 < model->config().vocab_size ? prompt[10] + 1 : 0;
  PrefixCache cache(int64_t(1) << 30);
  cache.insert(held(short_one));
  cache.insert(held(long_one));
  ASSERT_EQ(cache.entries(), 2);
  auto fork = cache.lookup(prompt, 40);
  ASSERT_TRUE(fork);
  EXPECT_EQ(fork->tokens, short_one);
  fork = cache.lookup(prompt, 64);
  ASSERT_TRUE(fork);
  EXPECT_EQ(fork->tokens, long_one) << "with room for it, the longer shared prefix wins";
}

}  // namespace
}  // namespace fathom
