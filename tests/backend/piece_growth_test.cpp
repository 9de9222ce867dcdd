// A recorded step's pieces grow as fast as the host's pace allows
// (src/backend/cuda/piece_growth.h): chosen once, from the first replayed
// steps, with half the GPU's lead over the host kept as margin.
#include "backend/cuda/piece_growth.h"

#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

namespace fathom::cuda {
namespace {

// kSamples replayed steps whose GPU time is `pace` times the host's, each
// step's times drawn at random (the pace is of their sums).
PieceGrowth after_steps(double pace, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> host(1e-4, 6e-4);
  PieceGrowth growth;
  for (int i = 0; i < PieceGrowth::kSamples; ++i) {
    const double h = host(rng);
    growth.sample(h, h * pace);
  }
  return growth;
}

TEST(PieceGrowth, DoublesUntilReplayedStepsHaveBeenTimed) {
  PieceGrowth growth;
  EXPECT_EQ(growth.factor(), 2u);
  for (int i = 0; i + 1 < PieceGrowth::kSamples; ++i) {
    growth.sample(1e-4, 1e-2);  // a GPU far behind the host
    EXPECT_EQ(growth.factor(), 2u) << "after " << i + 1 << " steps";
  }
}

TEST(PieceGrowth, TakesTheLargestFactorWithinHalfTheGpusLead) {
  auto rng = testing::fresh_rng();
  // An 8B decode step on an H100: 3.49 ms on the GPU, 0.19 ms of the host's.
  EXPECT_EQ(after_steps(3.49 / 0.19, rng).factor(), 8u);
  EXPECT_EQ(after_steps(16.0, rng).factor(), 8u);
  EXPECT_EQ(after_steps(15.9, rng).factor(), 4u);
  EXPECT_EQ(after_steps(8.0, rng).factor(), 4u);
  EXPECT_EQ(after_steps(7.9, rng).factor(), 2u);
  EXPECT_EQ(after_steps(1.0, rng).factor(), 2u);  // a small model: the host barely ahead
  EXPECT_EQ(after_steps(1000.0, rng).factor(), PieceGrowth::kMax);
}

TEST(PieceGrowth, StaysOnceChosenAndSkipsUntimedSteps) {
  auto rng = testing::fresh_rng();
  PieceGrowth growth;
  for (int i = 0; i < PieceGrowth::kSamples; ++i) {
    growth.sample(2e-4, -1.0);  // the GPU's time unknown: not a sample
    growth.sample(0.0, 1e-3);
  }
  EXPECT_EQ(growth.factor(), 2u);
  growth = after_steps(20.0, rng);
  ASSERT_EQ(growth.factor(), 8u);
  for (int i = 0; i < 4 * PieceGrowth::kSamples; ++i) growth.sample(1e-3, 1e-3);  // the host slows later
  EXPECT_EQ(growth.factor(), 8u);  // the pieces' graphs keep their shapes
}

}  // namespace
}  // namespace fathom::cuda
