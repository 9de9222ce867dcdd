#include "engine/token_logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;

std::vector<float> random_logits(std::mt19937_64& rng, size_t n, float spread) {
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The plain definition: log Σ exp in long double, every id sorted.
long double log_normalizer(const std::vector<float>& logits) {
  long double total = 0.0L;
  for (float l : logits) total += std::exp((long double)l);
  return std::log(total);
}

TEST(LogSumExp, FastMatchesTheDefinitionOverVocabularySizes) {
  auto rng = fresh_rng();
  const auto fast = cpu::best_log_sum_exp();
  // Lengths around the 16-lane, 32-element and 4096-element block edges, and a
  // 256k vocabulary; spreads from flat to one logit dominating.
  for (size_t n : {1, 15, 16, 17, 33, 4095, 4097, 151936, 262144})
    for (float spread : {0.1f, 3.0f, 30.0f}) {
      auto logits = random_logits(rng, n, spread);
      const long double want = log_normalizer(logits);
      EXPECT_NEAR(double(cpu::log_sum_exp_reference(logits.data(), int64_t(n))), double(want), 1e-9 * std::max(1.0, std::fabs(double(want)))) << n;
      EXPECT_NEAR(fast(logits.data(), int64_t(n)), double(want), 2e-6 * std::max(1.0, std::fabs(double(want))))
          << "n " << n << " spread " << spread;
    }
}

TEST(LogSumExp, InfinitiesAndLargeLogits) {
  auto rng = fresh_rng();
  for (auto lse : {cpu::log_sum_exp_reference, cpu::best_log_sum_exp()}) {
    auto logits = random_logits(rng, 1000, 2.0f);
    std::vector<float> masked(logits.size(), -INFINITY);
    EXPECT_EQ(lse(masked.data(), int64_t(masked.size())), -INFINITY);
    // Only a few ids allowed (a grammar's mask): the others add nothing.
    masked[7] = logits[7], masked[500] = logits[500], masked[999] = logits[999];
    const double want = std::log(std::exp(double(logits[7])) + std::exp(double(logits[500])) + std::exp(double(logits[999])));
    EXPECT_NEAR(lse(masked.data(), int64_t(masked.size())), want, 1e-6);
    // Logits far from zero: the max is taken out first, nothing overflows.
    for (auto& l : logits) l += 5000.0f;
    EXPECT_NEAR(lse(logits.data(), int64_t(logits.size())), double(log_normalizer(logits)), 1e-6 * 5000.0);
    logits[3] = INFINITY;
    EXPECT_EQ(lse(logits.data(), int64_t(logits.size())), INFINITY);
  }
}

TEST(TokenLogprobs, ChosenTokenAndTopAlternativesMatchASortedVocabulary) {
  auto rng = fresh_rng();
  const size_t vocab = 151936;
  auto logits = random_logits(rng, vocab, 3.0f);
  logits[1234] = logits[99];  // a tie: the lower id comes first
  const long double norm = log_normalizer(logits);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  const int32_t id = int32_t(rng() % vocab);
  for (int top_n : {0, 1, 5, 20}) {
    const TokenLogprobs got = token_logprobs(logits, id, top_n);
    EXPECT_NEAR(got.logprob, double(logits[size_t(id)] - norm), 1e-4);
    ASSERT_EQ(got.top.size(), size_t(top_n));
    for (int i = 0; i < top_n; ++i) {
      EXPECT_EQ(got.top[size_t(i)].first, order[size_t(i)]) << "rank " << i;
      EXPECT_NEAR(got.top[size_t(i)].second, double(logits[size_t(order[size_t(i)])] - norm), 1e-4);
    }
  }
  // The tie, ranked: both ids where the sort put them, the lower first.
  std::vector<float> tied(50);
  for (size_t i = 0; i < tied.size(); ++i) tied[i] = float(i % 5);
  const TokenLogprobs t = token_logprobs(tied, 0, 4);
  ASSERT_EQ(t.top.size(), 4u);
  EXPECT_EQ(t.top[0].first, 4);
  EXPECT_EQ(t.top[1].first, 9);
  EXPECT_EQ(t.top[2].first, 14);
  EXPECT_EQ(t.top[3].first, 19);
  // More alternatives asked for than the vocabulary holds: all of it.
  EXPECT_EQ(token_logprobs(std::vector<float>{1.0f, 2.0f}, 1, 20).top.size(), 2u);
}

TEST(TokenLogprobs, AnIdOutsideTheVocabularyIsAnError) {
  const std::vector<float> logits{0.5f, -1.0f, 2.0f};
  EXPECT_THROW(token_logprobs(logits, 3, 0), Error);
  EXPECT_THROW(token_logprobs(logits, -1, 0), Error);
  EXPECT_THROW(token_logprobs({}, 0, 0), Error);
}

}  // namespace
}  // namespace fathom
