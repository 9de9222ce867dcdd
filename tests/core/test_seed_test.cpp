// The tests' fresh generators and their replay: a failed test prints the
// seeds it drew, and a seed given back as FATHOM_TEST_SEED draws the same
// numbers again.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace fathom::testing {
namespace {

// Sets FATHOM_TEST_SEED for one test and puts back what was there.
class TestSeed : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* s = std::getenv("FATHOM_TEST_SEED")) saved_ = s;
  }
  void TearDown() override {
    if (saved_) setenv("FATHOM_TEST_SEED", saved_->c_str(), 1);
    else unsetenv("FATHOM_TEST_SEED");
  }
  static void set(const std::string& value) { setenv("FATHOM_TEST_SEED", value.c_str(), 1); }

 private:
  std::optional<std::string> saved_;
};

TEST_F(TestSeed, AReplayedSeedDrawsTheFailedRunsNumbers) {
  unsetenv("FATHOM_TEST_SEED");
  uint64_t first = 0;
  auto original = fresh_rng(&first);
  const uint64_t a = original(), b = original();

  set(std::to_string(first));
  uint64_t replayed = 0;
  auto again = fresh_rng(&replayed);
  EXPECT_EQ(replayed, first);
  EXPECT_EQ(again(), a);
  EXPECT_EQ(again(), b);
  EXPECT_EQ(std::mt19937_64(first)(), a);
}

TEST_F(TestSeed, UnsetOrEmptyDrawsAFreshSeedEachTime) {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    if (value) set(value);
    else unsetenv("FATHOM_TEST_SEED");
    uint64_t s1 = 0, s2 = 0;
    fresh_rng(&s1);
    fresh_rng(&s2);
    EXPECT_NE(s1, s2) << "two fresh 64-bit seeds met";  // odds 2^-64
    EXPECT_EQ(replayed_seed(), std::nullopt);
  }
}

TEST_F(TestSeed, TheLargestSeedReplays) {
  set("18446744073709551615");
  EXPECT_EQ(replayed_seed(), UINT64_MAX);
}

TEST_F(TestSeed, ASeedThatIsNotADecimalNumberIsAnErrorNamingIt) {
  for (const char* bad : {"12x", "-1", "0x10", " 7", "18446744073709551616", "seed"}) {
    set(bad);
    try {
      fresh_rng();
      ADD_FAILURE() << "FATHOM_TEST_SEED='" << bad << "' was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST_F(TestSeed, EverySeedATestDrawsIsKeptForItsFailureReport) {
  unsetenv("FATHOM_TEST_SEED");
  uint64_t a = 0, b = 0;
  fresh_rng(&a);
  fresh_rng(&b);
  EXPECT_EQ(seeds_drawn(), (std::vector<uint64_t>{a, b}));
  // The listener empties them as the next test starts.
  SeedReport listener;
  listener.OnTestStart(*::testing::UnitTest::GetInstance()->current_test_info());
  EXPECT_TRUE(seeds_drawn().empty());
  // A passing test prints nothing.
  ::testing::internal::CaptureStdout();
  fresh_rng();
  listener.OnTestEnd(*::testing::UnitTest::GetInstance()->current_test_info());
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
}

TEST(SeedReportText, NamesEverySeedAndHowToReplayTheFirst) {
  EXPECT_EQ(seed_report({}), "");
  EXPECT_EQ(seed_report({7, UINT64_MAX}),
            "seeds this test drew: 7 18446744073709551615 (FATHOM_TEST_SEED=7 gives every generator the first)");
}

}  // namespace
}  // namespace fathom::testing
