#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;

std::vector<float> random_logits(std::mt19937_64& rng, int n) {
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Sampler, TemperatureZeroAndTopKOneAreGreedy) {
  auto rng = fresh_rng();
  const auto logits = random_logits(rng, 300);
  const int32_t best = cpu::argmax(logits);
  EXPECT_EQ(Sampler({.temperature = 0.0f}).sample(logits, {}), best);
  Sampler top1({.temperature = 1.5f, .top_k = 1, .seed = rng()});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(top1.sample(logits, {}), best);
}

TEST(Sampler, SubnormalAndTinyTemperaturesAreGreedyNotNaN) {
  // Dividing logits by 1e-40 gives infinities and inf − inf is NaN: the last id used to win.
  auto rng = fresh_rng();
  for (float t : {1e-40f, 1e-30f, 1e-6f}) {
    const auto logits = random_logits(rng, 1000);
    const int32_t best = cpu::argmax(logits);
    Sampler s({.temperature = t, .top_p = 0.9f, .seed = rng()});
    for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(logits, {}), best) << t;
  }
}

TEST(Sampler, AnInfiniteLogitTakesAllTheMass) {
  auto rng = fresh_rng();
  auto logits = random_logits(rng, 500);
  const int32_t winner = int32_t(rng() % 500);
  logits[size_t(winner)] = INFINITY;
  Sampler s({.temperature = 0.7f, .seed = rng()});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(logits, {}), winner);
}

TEST(Sampler, ArgmaxIsTheFirstLargestLogit) {
  auto rng = fresh_rng();
  for (int n : {1, 7, 8, 9, 300, 151936}) {
    auto logits = random_logits(rng, n);
    EXPECT_EQ(cpu::argmax(logits), std::max_element(logits.begin(), logits.end()) - logits.begin()) << n;
    if (n < 9) continue;
    logits[n - 1] = logits[3] = 100.0f;  // a tie: the first wins, also past the last whole 8
    EXPECT_EQ(cpu::argmax(logits), 3) << n;
  }
  // Ties anywhere (in one lane of 16, in two, the later lane holding the
  // earlier index), NaNs skipped, nothing above -inf.
  for (int round = 0; round < 200; ++round) {
    const int n = 2 + int(rng() % 400);
    auto logits = random_logits(rng, n);
    for (int i = 0; i < n / 10; ++i) logits[rng() % size_t(n)] = NAN;
    const size_t a = rng() % size_t(n - 1), b = a + 1 + rng() % size_t(n - 1 - a);
    logits[a] = logits[b] = 50.0f;
    EXPECT_EQ(cpu::argmax(logits), int32_t(a)) << n << " " << a << " " << b;
  }
  EXPECT_EQ(cpu::argmax(std::vector<float>{NAN, -INFINITY, -INFINITY}), 1);
  EXPECT_EQ(cpu::argmax(std::vector<float>(40, -INFINITY)), 0);
  EXPECT_EQ(cpu::argmax(std::vector<float>(40, NAN)), 0);
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  auto rng = fresh_rng();
  const auto logits = random_logits(rng, 50);
  const uint64_t seed = rng();
  Sampler a({.temperature = 1.0f, .seed = seed}), b({.temperature = 1.0f, .seed = seed}),
      c({.temperature = 1.0f, .seed = seed + 1});
  std::vector<int32_t> da, db, dc;
  for (int i = 0; i < 64; ++i) {
    da.push_back(a.sample(logits, {}));
    db.push_back(b.sample(logits, {}));
    dc.push_back(c.sample(logits, {}));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

TEST(Sampler, TopKTopPAndMinPRestrictTheCandidates) {
  auto rng = fresh_rng();
  auto logits = random_logits(rng, 40);
  std::vector<int32_t> order(40);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  Sampler k3({.top_k = 3, .seed = rng()});
  for (int i = 0; i < 200; ++i) {
    const int32_t id = k3.sample(logits, {});
    EXPECT_TRUE(id == order[0] || id == order[1] || id == order[2]);
  }
  // A dominant token with mass > top_p is the only candidate.
  logits[order[0]] += 50.0f;
  Sampler p({.top_p = 0.9f, .seed = rng()});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p.sample(logits, {}), order[0]);
  Sampler m({.min_p = 0.5f, .seed = rng()});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(m.sample(logits, {}), order[0]);
}

// The nucleus is sorted only as far as it reaches (the best 256 ids, then
// 4,096, then all): at every size it is the sorted vocabulary's shortest
// prefix reaching top_p, with the probabilities of a full softmax.
TEST(Sampler, TopPKeepsTheShortestSortedPrefixAtEverySize) {
  auto rng = fresh_rng();
  const int vocab = 151936;  // Qwen3's: the rounds of 256 and 4,096 ids come before a full sort
  const auto logits = random_logits(rng, vocab);
  const float temperature = 0.8f;
  std::vector<float> w(vocab);  // the sampler's arithmetic: logits ÷ temperature in f32
  for (int i = 0; i < vocab; ++i) w[i] = logits[i] / temperature;
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[a] > w[b]; });
  const float best = w[order[0]];
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) total += std::exp(double(w[i] - best));
  std::vector<double> cumulative(vocab);
  for (int i = 0; i < vocab; ++i) cumulative[i] = (i ? cumulative[i - 1] : 0.0) + std::exp(double(w[order[i]] - best)) / total;
  for (int size : {1, 7, 256, 257, 1000, 4096, 4097, 12000, 30000, vocab}) {
    // A top_p just above the mass of the best size − 1 ids keeps exactly size ids.
    const float top_p = size == 1 ? 1e-6f : std::nextafter(float(cumulative[size - 2]), 1.0f);
    if (top_p >= 1.0f || cumulative[size - 1] < top_p) continue;  // float rounding merged two sizes
    Sampler s({.temperature = temperature, .top_p = top_p, .seed = rng()});
    TokenDistribution d;
    s.distribution(logits, {}, d);
    ASSERT_EQ(d.ids.size(), size_t(size)) << "top_p " << top_p;
    std::vector<int32_t> kept(d.ids), want(order.begin(), order.begin() + size);
    std::sort(kept.begin(), kept.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(kept, want) << "the best " << size << " ids";
    for (int i = 0; i < size; ++i) {
      if (i > 0) {
        EXPECT_GE(w[d.ids[i - 1]], w[d.ids[i]]) << "best first, rank " << i << " of " << size;
      }
      const double p = std::exp(double(w[d.ids[i]] - best)) / total / cumulative[size - 1];
      EXPECT_NEAR(d.probs[i], p, 1e-9 * p) << "rank " << i << " of " << size;
    }
  }
}

// The softmax weights of an untruncated distribution come from a vectorized
// double exp: within a few ulp of std::exp, zero and subnormal tails included.
TEST(ExpWeights, FastMatchesStdExpInDouble) {
  auto rng = fresh_rng();
  for (int n : {1, 15, 16, 17, 1000, 151936}) {
    auto x = random_logits(rng, n);
    for (int i = 0; i < n; i += 97) x[i] *= 200.0f;  // far below the max: tiny, subnormal and zero weights
    if (n > 3) x[3] = -INFINITY;
    const float max = *std::max_element(x.begin(), x.end());
    std::vector<double> fast(n), ref(n);
    const double fast_total = cpu::best_exp_weights()(x.data(), max, n, fast.data());
    const double ref_total = cpu::exp_weights_reference(x.data(), max, n, ref.data());
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(fast[i], ref[i], 4e-16 * ref[i] + 1e-320) << "x " << x[i] << " max " << max;
    EXPECT_NEAR(fast_total, ref_total, 1e-14 * ref_total);
    if (n > 3) {
      EXPECT_EQ(fast[3], 0.0);
    }
  }
}

TEST(Sampler, RepetitionPenaltyAppliesOncePerDistinctToken) {
  std::vector<float> logits = {2.0f, 1.9f, -1.0f};
  // Penalising token 0 (2.0 / 1.1 ≈ 1.82) makes token 1 the greedy choice.
  Sampler s({.temperature = 0.0f, .repetition_penalty = 1.1f});
  std::vector<int32_t> history = {0, 0, 0, 0, 0, 0};
  EXPECT_EQ(s.sample(logits, history), 1);
  // Applied once: token 0 stays above a token at 1.7 despite six occurrences.
  std::vector<float> close = {2.0f, 1.7f};
  EXPECT_EQ(s.sample(close, history), 0);
}

TEST(Sampler, DrawFrequenciesFollowTheDistribution) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  auto rng = fresh_rng();
  Sampler s({.temperature = 1.0f, .seed = rng()});
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[s.sample(logits, {})]++;
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.02);
}

// The candidates' walk of a distribution by a uniform: what draw() does.
int32_t walk(const TokenDistribution& d, double uniform) {
  double acc = 0.0;
  for (size_t i = 0; i < d.ids.size(); ++i)
    if (uniform < (acc += d.probs[i])) return d.ids[i];
  return d.ids.back();
}

// cpu::pick_token (what Backend::pick_rows draws on every device) picks what
// the sampler's distribution gives for the same uniform, bit for bit: masked
// ids, a flat row (ties ranked by id), tiny and huge temperatures, top-k and
// top-p off and on, min-p from none to all.
TEST(Sampler, PickTokenDrawsFromTheSamplersDistribution) {
  auto rng = fresh_rng();
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (const int n : {1, 2, 5, 1000, 40000}) {
    std::vector<float> logits = random_logits(rng, n);
    for (int k = 0; k < n / 10; ++k) logits[size_t(rng() % uint64_t(n))] = -INFINITY;
    std::vector<float> flat(size_t(n), 1.5f);
    for (const auto* row : {&logits, &flat})
      for (const float temperature : {1e-3f, 0.3f, 1.0f, 2.5f, 80.0f})
        for (const int64_t top_k : {int64_t(0), int64_t(1), int64_t(3), int64_t(n / 2 + 1)})
          for (const float top_p : {1.0f, 0.9f, 0.3f})
            for (const float min_p : {0.0f, 0.05f, 0.6f, 1.0f}) {
              const SamplingParams params{.temperature = temperature, .top_k = top_k, .top_p = top_p, .min_p = min_p};
              Sampler s(params);
              ASSERT_TRUE(Sampler::pickable(params));
              TokenDistribution d;
              s.distribution(*row, {}, d);
              for (const double uniform : {0.0, u(rng), u(rng), u(rng), 0.99999999999}) {
                const PickRule rule{temperature, min_p, uniform, top_k, top_p};
                EXPECT_EQ(cpu::pick_token(*row, rule), walk(d, uniform))
                    << "n " << n << (row == &flat ? " flat" : "") << ", temperature " << temperature << ", top_k "
                    << top_k << ", top_p " << top_p << ", min_p " << min_p << ", uniform " << uniform;
              }
            }
  }
}

// Samplers without a repetition penalty pick where the logits are; a pickable sampler's next rule carries the uniform its own
// sample() would have drawn, and sample() draws by it.
TEST(Sampler, PickableSamplersDrawByTheirNextRule) {
  auto rng = fresh_rng();
  EXPECT_TRUE(Sampler::pickable({.temperature = 0.0f}));
  EXPECT_TRUE(Sampler::pickable({.temperature = 0.0f, .top_k = 5, .top_p = 0.5f}));  // greedy all the same
  EXPECT_TRUE(Sampler::pickable({.temperature = 0.7f, .min_p = 0.1f}));
  EXPECT_TRUE(Sampler::pickable({.temperature = 0.7f, .top_k = 40}));
  EXPECT_TRUE(Sampler::pickable({.temperature = 0.7f, .top_p = 0.9f}));
  EXPECT_FALSE(Sampler::pickable({.temperature = 0.0f, .repetition_penalty = 1.2f}));
  const uint64_t seed = rng();
  Sampler a({.temperature = 0.7f, .min_p = 0.1f, .seed = seed}), b({.temperature = 0.7f, .min_p = 0.1f, .seed = seed});
  const std::vector<float> logits = random_logits(rng, 300);
  for (int i = 0; i < 20; ++i) {
    const PickRule rule = a.next_pick_rule();
    EXPECT_EQ(rule.temperature, 0.7f);
    EXPECT_EQ(rule.min_p, 0.1f);
    EXPECT_EQ(b.sample(logits, {}), cpu::pick_token(logits, rule)) << "draw " << i;
  }
  EXPECT_EQ(Sampler({.temperature = 0.0f}).next_pick_rule().temperature, 0.0f);
  Sampler penalized({.temperature = 0.7f, .repetition_penalty = 1.2f});
  EXPECT_THROW(penalized.next_pick_rule(), Error);
}

TEST(Sampler, InvalidParametersAreRejected) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), Error);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.top_p = 1.5f}), Error);
  EXPECT_THROW(Sampler({.min_p = 2.0f}), Error);
  EXPECT_THROW(Sampler({.repetition_penalty = 0.0f}), Error);
  EXPECT_THROW(Sampler({.top_k = -2}), Error);
}

}  // namespace
}  // namespace fathom
