// A TokenConstraint in generation: every emitted token is one the constraint
// allowed at its position, and with speculative decoding the drafts it rejects
// are cut before verification while the output stays token for token the
// plain constrained run's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "engine/generator.h"
#include "engine/speculative.h"
#include "engine/token_constraint.h"
#include "test_util.h"

namespace fathom {
namespace {

// Allows id at position p (tokens accepted so far) when (id + p) % 3 == 0.
class EveryThirdToken final : public TokenConstraint {
 public:
  static bool allowed(int64_t id, int64_t position) { return (id + position) % 3 == 0; }
  void mask(std::span<float> logits, int64_t) override {
    for (size_t id = 0; id < logits.size(); ++id)
      if (!allowed(int64_t(id), position_)) logits[id] = -std::numeric_limits<float>::infinity();
  }
  bool accept(int32_t id) override {
    if (!allowed(id, position_)) return false;
    ++position_;
    return true;
  }
  void rollback(int64_t tokens) override { position_ -= tokens; }

 private:
  int64_t position_ = 0;
};

// Proposes the expected continuation with some tokens replaced by others.
class NoisyDrafter final : public Drafter {
 public:
  NoisyDrafter(std::vector<int32_t> truth, size_t prompt, int64_t vocab)
      : truth_(std::move(truth)), prompt_(prompt), vocab_(vocab) {}
  Draft propose(const std::vector<int32_t>& history, int64_t max, Sampler&) override {
    Draft out;
    for (size_t at = history.size() - prompt_; int64_t(out.tokens.size()) < max && at < truth_.size(); ++at) {
      const bool wrong = rng_() % 4 == 0;
      out.tokens.push_back(wrong ? int32_t((truth_[at] + 1 + rng_() % (vocab_ - 1)) % vocab_) : truth_[at]);
      ++proposed;
    }
    return out;
  }
  double relative_cost() const override { return 0.0; }
  std::unique_ptr<Drafter> fork() const override { return nullptr; }
  int64_t proposed = 0;

 private:
  std::vector<int32_t> truth_;
  size_t prompt_;
  int64_t vocab_;
  std::mt19937 rng_{7};
};

TEST(ConstrainedGeneration, EveryTokenFollowsTheConstraintAndDraftsAreCut) {
  LoadOptions o;
  auto model = load_model((std::filesystem::path(FATHOM_FIXTURES_DIR) / "parity" / "qwen3_untied_4layer").string(), o);
  const int64_t vocab = model->config().vocab_size;
  auto rng = testing::fresh_rng();
  GenerationRequest request;
  request.prompt = testing::random_ids(8, vocab, rng);
  request.max_new_tokens = 24;
  request.sampling.temperature = 0.0f;
  request.constraint = std::make_shared<EveryThirdToken>();
  const FixedPrefillPolicy policy(4);
  const GenerationResult plain = generate(*model, policy, request);
  ASSERT_EQ(int64_t(plain.ids.size()), request.max_new_tokens);
  for (size_t p = 0; p < plain.ids.size(); ++p) EXPECT_TRUE(EveryThirdToken::allowed(plain.ids[p], int64_t(p))) << p;

  // Without the constraint the greedy answer differs (it is not a no-op).
  GenerationRequest free = request;
  free.constraint = nullptr;
  EXPECT_NE(generate(*model, policy, free).ids, plain.ids);

  request.constraint = std::make_shared<EveryThirdToken>();
  NoisyDrafter drafter(plain.ids, request.prompt.size(), vocab);
  const GenerationResult spec = generate(*model, policy, request, {}, Speculation{&drafter, 4, /*adaptive=*/false});
  EXPECT_EQ(spec.ids, plain.ids);
  EXPECT_GT(spec.spec.accepted, 0);
  // A replaced token is almost never allowed at its position: those drafts, and the ones after them, were cut.
  EXPECT_LT(spec.spec.drafted, drafter.proposed);
}

}  // namespace
}  // namespace fathom
