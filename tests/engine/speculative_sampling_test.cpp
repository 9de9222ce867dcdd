// Speculative decoding with sampling: the rejection rule keeps the target's
// distribution (chi-square tests, on the rule alone and on whole sampled
// generations), a draft equal to the target is always accepted, seeds still
// reproduce, and the draft length policy follows the acceptance rate.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "engine/generator.h"
#include "engine/speculative.h"
#include "sanitized_build.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;
const fs::path kParityDir = fs::path(FATHOM_FIXTURES_DIR) / "parity";

// Pearson's statistic of `observed` counts against `probs` (cells with an
// expected count under 5 pooled), and the critical value at p = 1e-6 for its
// degrees of freedom (Wilson–Hilferty): a correct sampler fails about once in
// a million runs.
struct ChiSquare {
  double statistic = 0.0, critical = 0.0;
};
ChiSquare chi_square(const std::vector<double>& probs, const std::vector<int64_t>& observed, int64_t n) {
  double stat = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
  int64_t cells = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double expected = probs[i] * double(n);
    if (expected < 5.0) {
      pooled_expected += expected;
      pooled_observed += double(observed[i]);
      continue;
    }
    stat += (double(observed[i]) - expected) * (double(observed[i]) - expected) / expected;
    ++cells;
  }
  if (pooled_expected > 0.0) {
    stat += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / std::max(pooled_expected, 1e-9);
    ++cells;
  }
  const double k = double(std::max<int64_t>(1, cells - 1)), z = 4.753;  // upper 1e-6 of N(0, 1)
  const double h = 2.0 / (9.0 * k);
  return {stat, k * std::pow(1.0 - h + z * std::sqrt(h), 3.0)};
}

TokenDistribution random_distribution(int32_t vocab, int32_t support, std::mt19937_64& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) ids[size_t(i)] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  TokenDistribution d;
  double total = 0.0;
  std::uniform_real_distribution<double> weight(0.05, 1.0);
  for (int32_t i = 0; i < support; ++i) {
    d.ids.push_back(ids[size_t(i)]);
    d.probs.push_back(weight(rng));
    total += d.probs.back();
  }
  for (auto& p : d.probs) p /= total;
  return d;
}

TEST(SpeculativeSampling, TheRejectionRuleKeepsTheTargetDistribution) {
  auto rng = testing::fresh_rng();
  const int32_t vocab = 12;
  for (int trial = 0; trial < 3; ++trial) {
    // Supports that overlap in part: some drafts are impossible for the target.
    const TokenDistribution p = random_distribution(vocab, 7, rng), q = random_distribution(vocab, 8, rng);
    Sampler judge({.temperature = 1.0f, .seed = rng()}), drafter({.temperature = 1.0f, .seed = rng()});
    const int64_t n = 200000;
    std::vector<int64_t> counts(size_t(vocab), 0);
    int64_t accepted = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t d = drafter.draw(q);
      const DraftVerdict v = judge_draft(p, &q, d, judge);
      ++counts[size_t(v.token)];
      accepted += v.accepted;
      if (v.accepted) {
        ASSERT_EQ(v.token, d);
      }
    }
    std::vector<double> probs(size_t(vocab), 0.0);
    for (size_t i = 0; i < p.ids.size(); ++i) probs[size_t(p.ids[i])] = p.probs[i];
    const ChiSquare c = chi_square(probs, counts, n);
    EXPECT_LT(c.statistic, c.critical) << "trial " << trial;
    // Acceptance is Σ min(p, q).
    double overlap = 0.0;
    for (int32_t id = 0; id < vocab; ++id) overlap += std::min(p.prob(id), q.prob(id));
    EXPECT_NEAR(double(accepted) / double(n), overlap, 0.01);
    for (int32_t id = 0; id < vocab; ++id)
      if (p.prob(id) == 0.0) {
        EXPECT_EQ(counts[size_t(id)], 0) << "an id the target cannot produce";
      }
  }
}

TEST(SpeculativeSampling, APointMassDraftKeepsTheTargetDistribution) {
  // Prompt lookup proposes tokens outright: q = 1 on the drafted token.
  auto rng = testing::fresh_rng();
  const int32_t vocab = 10;
  const TokenDistribution p = random_distribution(vocab, 6, rng);
  Sampler judge({.temperature = 1.0f, .seed = rng()});
  const int64_t n = 100000;
  for (const int32_t drafted : {p.ids[0], p.ids[3], int32_t(vocab + 5)}) {  // likely, less likely, impossible
    std::vector<int64_t> counts(size_t(vocab), 0);
    for (int64_t i = 0; i < n; ++i) {
      const DraftVerdict v = judge_draft(p, nullptr, drafted, judge);
      if (!v.accepted) {
        ASSERT_NE(v.token, drafted);
      }
      ASSERT_LT(v.token, vocab);
      ++counts[size_t(v.token)];
    }
    std::vector<double> probs(size_t(vocab), 0.0);
    for (size_t i = 0; i < p.ids.size(); ++i) probs[size_t(p.ids[i])] = p.probs[i];
    const ChiSquare c = chi_square(probs, counts, n);
    EXPECT_LT(c.statistic, c.critical) << "drafted " << drafted;
  }
}

std::unique_ptr<Model> load(const std::string& fixture) {
  return load_model((kParityDir / fixture).string(), LoadOptions{});
}

// Drafts from q = ⅔·(the target's own probabilities, handed to its
// candidates in reverse order) + ⅓·(uniform over a few fixed ids): drafts are
// over- or under-weighted and sometimes impossible for the target, so
// acceptance, rejection and the residual all take part.
class BlendedDrafter final : public Drafter {
 public:
  BlendedDrafter(const Model& model, std::vector<int32_t> noise) : model_(model), noise_(std::move(noise)) {}
  Draft propose(const std::vector<int32_t>& history, int64_t max, Sampler& sampler) override {
    auto state = model_.new_state(int64_t(history.size()) + max + 1);
    Tensor logits = model_.forward(history, *state, false);
    std::vector<int32_t> seen = history;
    Draft draft;
    const int64_t vocab = model_.config().vocab_size;
    for (int64_t i = 0; i < max; ++i) {
      TokenDistribution own;
      sampler.distribution({logits.data<float>(), size_t(vocab)}, seen, own);
      std::map<int32_t, double> mix;
      for (size_t j = 0; j < own.ids.size(); ++j) mix[own.ids[j]] += own.probs[own.ids.size() - 1 - j] * 2.0 / 3.0;
      for (int32_t id : noise_) mix[id] += 1.0 / 3.0 / double(noise_.size());
      TokenDistribution& q = draft.dists.emplace_back();
      for (const auto& [id, p] : mix) {
        q.ids.push_back(id);
        q.probs.push_back(p);
      }
      const int32_t token = sampler.draw(q);
      draft.tokens.push_back(token);
      seen.push_back(token);
      logits = model_.forward({token}, *state, false);
    }
    return draft;
  }
  double relative_cost() const override { return 0.0; }
  std::unique_ptr<Drafter> fork() const override { ADD_FAILURE() << "not forked in these tests"; return nullptr; }

 private:
  const Model& model_;
  std::vector<int32_t> noise_;
};

TEST(SpeculativeSampling, SampledGenerationsFollowTheTargetDistribution) {
  auto model = load("qwen3_untied_4layer");
  const int64_t vocab = model->config().vocab_size;
  auto rng = testing::fresh_rng();
  GenerationRequest request;
  request.prompt = testing::random_ids(8, vocab, rng);
  request.max_new_tokens = 3;
  // Two candidates a step, far from even (random models' logits are close).
  request.sampling = {.temperature = 0.3f, .top_k = 2};
  const FixedPrefillPolicy policy(8);

  // The exact distribution of the 3 tokens: every path through the top-2 candidates.
  std::map<std::vector<int32_t>, double> exact;
  Sampler probe(request.sampling);
  std::function<void(std::vector<int32_t>, double)> walk = [&](std::vector<int32_t> sequence, double p) {
    if (int64_t(sequence.size()) == int64_t(request.prompt.size()) + request.max_new_tokens) {
      exact[{sequence.end() - request.max_new_tokens, sequence.end()}] = p;
      return;
    }
    auto state = model->new_state(int64_t(sequence.size()));
    const Tensor logits = prefill(*model, *state, sequence, policy, false);
    TokenDistribution d;
    probe.distribution({logits.data<float>(), size_t(vocab)}, sequence, d);
    for (size_t i = 0; i < d.ids.size(); ++i) {
      std::vector<int32_t> longer = sequence;
      longer.push_back(d.ids[i]);
      walk(longer, p * d.probs[i]);
    }
  };
  walk(request.prompt, 1.0);
  ASSERT_LE(exact.size(), 8u);

  BlendedDrafter drafter(*model, testing::random_ids(3, vocab, rng));
  // Fewer draws under a sanitizer (several times slower): the test's
  // significance level is the same, only its power is lower.
  const int64_t n = testing::kSanitizedBuild ? 1000 : 4000;
  std::map<std::vector<int32_t>, int64_t> seen;
  int64_t drafted = 0, accepted = 0;
  for (int64_t i = 0; i < n; ++i) {
    request.sampling.seed = rng();
    const GenerationResult r = generate(*model, policy, request, {}, Speculation{&drafter, 3, /*adaptive=*/false});
    ASSERT_TRUE(exact.count(r.ids)) << "a sequence the target cannot produce";
    ++seen[r.ids];
    drafted += r.spec.drafted;
    accepted += r.spec.accepted;
  }
  std::vector<double> probs;
  std::vector<int64_t> counts;
  for (const auto& [ids, p] : exact) {
    probs.push_back(p);
    counts.push_back(seen[ids]);
  }
  const ChiSquare c = chi_square(probs, counts, n);
  EXPECT_LT(c.statistic, c.critical);
  EXPECT_GT(accepted, 0) << "some drafts are kept";
  EXPECT_LT(accepted, drafted) << "and some rejected";
}

TEST(SpeculativeSampling, ADraftThatIsTheTargetIsAlwaysKept) {
  // Verify rows take the decode path row by row, so the draft's q is the
  // target's p bit for bit and min(1, p/q) = 1 every time.
  auto model = load("qwen3_untied_4layer");
  auto rng = testing::fresh_rng();
  GenerationRequest request;
  request.prompt = testing::random_ids(8, model->config().vocab_size, rng);
  request.max_new_tokens = 24;
  request.sampling = {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .min_p = 0.02f, .repetition_penalty = 1.1f,
                      .seed = rng()};
  ModelDrafter drafter(*model, 8 + 24 + 8, 1.0);
  const GenerationResult r =
      generate(*model, FixedPrefillPolicy(8), request, {}, Speculation{&drafter, 4, /*adaptive=*/false});
  EXPECT_GT(r.spec.drafted, 10);
  EXPECT_EQ(r.spec.accepted, r.spec.drafted);
}

TEST(SpeculativeSampling, TheSameSeedGivesTheSameOutput) {
  auto model = load("qwen3_untied_4layer");
  auto rng = testing::fresh_rng();
  GenerationRequest request;
  request.prompt = testing::random_ids(8, model->config().vocab_size, rng);
  request.max_new_tokens = 20;
  request.sampling = {.temperature = 1.0f, .top_p = 0.9f, .seed = rng()};
  BlendedDrafter drafter(*model, testing::random_ids(3, model->config().vocab_size, rng));
  const FixedPrefillPolicy policy(8);
  const GenerationResult a = generate(*model, policy, request, {}, Speculation{&drafter, 4});
  const GenerationResult b = generate(*model, policy, request, {}, Speculation{&drafter, 4});
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.spec.drafted, b.spec.drafted);
  request.sampling.seed += 1;
  bool differs = false;
  for (int i = 0; i < 3 && !differs; ++i, ++request.sampling.seed)
    differs = generate(*model, policy, request, {}, Speculation{&drafter, 4}).ids != a.ids;
  EXPECT_TRUE(differs) << "other seeds, other samples";
}

TEST(DraftLengthPolicy, LongDraftsWhileAcceptedNoneWhileRejected) {
  DraftLengthPolicy free(8, 0.0);
  for (int i = 0; i < 20; ++i) {
    const int64_t k = free.next();
    free.observe(k, k);
  }
  EXPECT_EQ(free.next(), 8) << "everything accepted: the longest drafts";
  for (int i = 0; i < 80; ++i) free.observe(8, 0);
  EXPECT_LT(free.acceptance(), 0.05);
  // Nothing accepted: drafting costs more than it brings, with a probe now and then.
  int64_t probes = 0;
  for (int i = 0; i < 4 * DraftLengthPolicy::kProbeEvery; ++i) {
    const int64_t k = free.next();
    EXPECT_LE(k, 1);
    probes += k;
  }
  EXPECT_EQ(probes, 4);
}

TEST(DraftLengthPolicy, ACostlyDraftShortensDrafts) {
  // Half the drafts kept: a free drafter drafts long, one costing 0.4 of a target step drafts short.
  DraftLengthPolicy cheap(8, 0.0), costly(8, 0.4);
  for (int i = 0; i < 50; ++i) {
    cheap.observe(4, i % 2 ? 4 : 1);
    costly.observe(4, i % 2 ? 4 : 1);
  }
  EXPECT_NEAR(cheap.acceptance(), costly.acceptance(), 1e-12);
  const int64_t long_drafts = cheap.next(), short_drafts = costly.next();
  EXPECT_GE(long_drafts, 4);
  EXPECT_GE(short_drafts, 1);
  EXPECT_LT(short_drafts, long_drafts);
}

}  // namespace
}  // namespace fathom
