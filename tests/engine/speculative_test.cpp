// Speculative decoding against plain decoding: greedy output must be the same
// token for token on every architecture fixture, for drafts of 1 to 8 tokens
// that are sometimes right and sometimes wrong, under plain, delayed-start
// affine and TurboQuant KV; and the transaction keeps exactly what it accepts.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/error.h"
#include "engine/generator.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;
const fs::path kParityDir = fs::path(FATHOM_FIXTURES_DIR) / "parity";

using testing::random_ids;

// Drafts the plain run's own continuation, each token wrong with probability
// `error` (then some other id): acceptance and rollback are both exercised.
class NoisyOracleDrafter final : public Drafter {
 public:
  NoisyOracleDrafter(std::vector<int32_t> truth, size_t prompt, int64_t vocab, double error, uint32_t seed)
      : truth_(std::move(truth)), prompt_(prompt), vocab_(vocab), error_(error), rng_(seed) {}
  Draft propose(const std::vector<int32_t>& history, int64_t max, Sampler&) override {
    Draft out;
    std::bernoulli_distribution wrong(error_);
    for (size_t at = history.size() - prompt_; int64_t(out.tokens.size()) < max && at < truth_.size(); ++at)
      out.tokens.push_back(wrong(rng_) ? int32_t((truth_[at] + 1 + rng_() % (vocab_ - 1)) % vocab_) : truth_[at]);
    return out;
  }
  double relative_cost() const override { return 0.0; }
  std::unique_ptr<Drafter> fork() const override { ADD_FAILURE() << "not forked in these tests"; return nullptr; }

 private:
  std::vector<int32_t> truth_;
  size_t prompt_;
  int64_t vocab_;
  double error_;
  std::mt19937 rng_;
};

std::unique_ptr<Model> load(const std::string& fixture, const KvScheme& scheme) {
  LoadOptions o;
  o.kv_scheme = scheme;
  return load_model((kParityDir / fixture).string(), o);
}

class SpeculativeOnFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeOnFixtures, GreedyEqualsPlainForEveryDraftLength) {
  auto rng = testing::fresh_rng();
  const int64_t prompt_len = 10, max_new = 24;
  // The delayed start lands a few tokens into generation, inside drafted spans.
  for (const KvScheme& scheme : testing::kv_schemes_for(GetParam(), prompt_len + 3)) {
    auto model = load(GetParam(), scheme);
    GenerationRequest request;
    request.prompt = random_ids(prompt_len, model->config().vocab_size, rng);
    request.max_new_tokens = max_new;
    request.sampling.temperature = 0.0f;
    const FixedPrefillPolicy policy(4);
    const GenerationResult plain = generate(*model, policy, request);
    ASSERT_EQ(int64_t(plain.ids.size()), max_new);
    for (int64_t k = 1; k <= 8; ++k) {
      NoisyOracleDrafter drafter(plain.ids, request.prompt.size(), model->config().vocab_size, 0.3, uint32_t(rng()));
      const GenerationResult spec = generate(*model, policy, request, {}, Speculation{&drafter, k, /*adaptive=*/false});
      EXPECT_EQ(spec.ids, plain.ids) << scheme.cache_key() << ", K = " << k;
      EXPECT_GT(spec.spec.drafted, 0);
      EXPECT_LE(spec.spec.accepted, spec.spec.drafted);
      EXPECT_LT(spec.spec.target_passes, max_new) << "speculation saved no target pass, K = " << k;
    }
  }
}

TEST_P(SpeculativeOnFixtures, ADraftModelOfTheSameVocabulary) {
  // The target as its own draft: every draft is right, and its state follows
  // the accepted history through rollbacks (hybrid drafts start over).
  auto rng = testing::fresh_rng();
  auto model = load(GetParam(), KvScheme::bf16());
  GenerationRequest request;
  request.prompt = random_ids(9, model->config().vocab_size, rng);
  request.max_new_tokens = 20;
  request.sampling.temperature = 0.0f;
  const FixedPrefillPolicy policy(5);
  const GenerationResult plain = generate(*model, policy, request);
  ModelDrafter drafter(*model, 9 + 20 + 8, /*relative_cost=*/1.0);
  // Fixed: drafting with the target itself never pays, and the adaptive policy would stop.
  const GenerationResult spec = generate(*model, policy, request, {}, Speculation{&drafter, 4, /*adaptive=*/false});
  EXPECT_EQ(spec.ids, plain.ids);
  EXPECT_GE(spec.spec.accepted * 10, spec.spec.drafted * 9) << "a draft identical to the target";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeOnFixtures, ::testing::ValuesIn(testing::parity_fixtures()));

TEST(Speculative, PromptLookupOnARepetitivePrompt) {
  auto model = load("qwen3_untied_4layer", KvScheme::bf16());
  auto rng = testing::fresh_rng();
  // Drafts come only where the answer repeats an n-gram of what came before,
  // which a random model's greedy answer misses about once in 150 phrases:
  // three phrases, and drafts in at least one of them.
  int64_t drafted = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::vector<int32_t> phrase = random_ids(6, model->config().vocab_size, rng);
    GenerationRequest request;
    for (int i = 0; i < 5; ++i) request.prompt.insert(request.prompt.end(), phrase.begin(), phrase.end());
    request.max_new_tokens = 30;
    request.sampling.temperature = 0.0f;
    const FixedPrefillPolicy policy(8);
    const GenerationResult plain = generate(*model, policy, request);
    NgramDrafter drafter;
    const GenerationResult spec = generate(*model, policy, request, {}, Speculation{&drafter, 5});  // adaptive
    EXPECT_EQ(spec.ids, plain.ids);
    drafted += spec.spec.drafted;
  }
  EXPECT_GT(drafted, 0);
}

TEST(Speculative, NgramDrafterProposesWhatFollowedTheLastOccurrence) {
  NgramDrafter drafter(3, 1);
  Sampler unused({.temperature = 0.0f});
  auto propose = [&](const std::vector<int32_t>& history, int64_t max) {
    const Draft d = drafter.propose(history, max, unused);
    EXPECT_TRUE(d.dists.empty()) << "prompt lookup drafts point masses";
    return d.tokens;
  };
  EXPECT_EQ(propose({1, 2, 3, 9, 1, 2, 3, 7, 8, 1, 2, 3}, 2), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(propose({5, 6, 7, 5}, 4), (std::vector<int32_t>{6, 7, 5, 6}));  // the loop 5 6 7, continued
  EXPECT_EQ(propose({9, 4, 4, 4}, 3), (std::vector<int32_t>{4, 4, 4}));      // a token repeating
  EXPECT_TRUE(propose({1, 2, 3}, 4).empty());
  EXPECT_TRUE(propose({4}, 4).empty());
}

TEST(SpeculativeTransaction, KeepsExactlyTheAcceptedPrefix) {
  for (const char* fixture : {"qwen3_untied_4layer", "gemma3_sliding", "qwen3_next_moe"}) {
    auto model = load(fixture, KvScheme::bf16());
    auto rng = testing::fresh_rng();
    const auto ids = random_ids(12, model->config().vocab_size, rng);
    // Reference: the first 9 tokens, one at a time after a prefill of 6.
    auto plain = model->new_state(40);
    model->forward({ids.begin(), ids.begin() + 6}, *plain, false);
    for (int i = 6; i < 9; ++i) model->forward({ids[size_t(i)]}, *plain, false);
    // Speculative: verify 6 positions, keep 3.
    auto spec = model->new_state(40);
    model->forward({ids.begin(), ids.begin() + 6}, *spec, false);
    ASSERT_TRUE(spec->can_begin(6));
    spec->begin(6);
    EXPECT_THROW(spec->begin(1), Error);  // one transaction at a time
    model->forward({ids.begin() + 6, ids.begin() + 12}, *spec, true);
    spec->resolve(3);
    EXPECT_EQ(spec->length(), 9) << fixture;
    EXPECT_EQ(spec->bytes(), plain->bytes()) << fixture;
    const Tensor a = model->forward({ids[9]}, *plain, false), b = model->forward({ids[9]}, *spec, false);
    double worst = 0.0;
    for (int64_t i = 0; i < a.numel(); ++i)
      worst = std::max(worst, double(std::abs(a.data<float>()[i] - b.data<float>()[i])));
    EXPECT_LT(worst, 1e-3) << fixture;
  }
}

TEST(SpeculativeTransaction, AFailedResolveInvalidatesTheSequence) {
  auto model = load("qwen3_untied_4layer", KvScheme::bf16());
  auto state = model->new_state(20);
  model->forward({1, 2, 3}, *state, false);
  EXPECT_FALSE(state->can_begin(0));
  EXPECT_FALSE(state->can_begin(18));  // past the capacity
  state->begin(3);
  model->forward({4, 5, 6}, *state, true);
  EXPECT_THROW(state->resolve(4), Error);  // more than were verified
  EXPECT_FALSE(state->valid());
  EXPECT_EQ(state->length(), 0);
  EXPECT_THROW(model->forward({7}, *state, false), Error);
}

TEST(SpeculativeTransaction, ADelayedStartIsNotCrossedInsideAStep) {
  auto model = load("qwen3_untied_4layer", KvScheme::turbo(3, 4, 10));
  auto state = model->new_state(40);
  model->forward({1, 2, 3, 4, 5, 6}, *state, false);
  EXPECT_EQ(state->max_verify_rows(), 4);  // positions 6..9 stay below the start
  EXPECT_FALSE(state->can_begin(5));
  state->begin(4);
  model->forward({7, 8, 9, 10}, *state, true);
  state->resolve(4);  // all kept: the cache reached the start and converted
  EXPECT_EQ(state->bytes(), model->kv_bytes_at(40));
}

}  // namespace
}  // namespace fathom
