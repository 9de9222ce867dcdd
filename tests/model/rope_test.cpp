// RoPE tables against the inverse frequencies and attention scaling that
// transformers computed for the parity fixtures (recorded in reference.json).
#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace fathom {
namespace {

namespace fs = std::filesystem;

TEST(Rope, InverseFrequenciesMatchTransformersForEveryVariant) {
  int checked = 0;
  for (const auto& e : fs::directory_iterator(fs::path(FATHOM_FIXTURES_DIR) / "parity")) {
    std::ifstream ref_in(e.path() / "reference.json");
    if (!ref_in) continue;
    nlohmann::json ref;
    ref_in >> ref;
    // Models with RoPE per layer type (Gemma 3) record no single table.
    if (!ref.contains("rope_inv_freq") || ref["rope_inv_freq"].is_null()) continue;
    const ModelConfig c = load_model_config(e.path().string());
    RopeTable table(c.rope, c.head_dim, c.max_position_embeddings);
    const auto expected = ref["rope_inv_freq"].get<std::vector<double>>();
    ASSERT_EQ(table.inv_freq().size(), expected.size()) << e.path();
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_NEAR(table.inv_freq()[i], expected[i], 1e-6 * expected[i] + 1e-12) << e.path() << " i=" << i;
    EXPECT_NEAR(table.attention_scaling(), ref.value("rope_attention_scaling", 1.0), 1e-6) << e.path();
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

TEST(Rope, TablesHoldScaledCosSinOfPositionTimesFrequency) {
  RopeConfig r;
  r.theta = 10000.0;
  RopeTable table(r, 8, 64);
  Tensor cos = Tensor::empty({3, 4}, DType::f32), sin = Tensor::empty({3, 4}, DType::f32);
  table.fill(5, 3, cos, sin);
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 4; ++i) {
      const double angle = (5 + t) * std::pow(10000.0, -2.0 * i / 8);
      EXPECT_NEAR(cos.data<float>()[t * 4 + i], std::cos(angle), 1e-5);
      EXPECT_NEAR(sin.data<float>()[t * 4 + i], std::sin(angle), 1e-5);
    }
}


// Gemma 4's global layers: frequencies span the whole head_dim with exponents
// over head_dim; only the first partial_rotary_factor of them are non-zero.
TEST(Rope, ProportionalKeepsHeadDimAndZeroesTheUnrotatedFrequencies) {
  RopeConfig r;
  r.type = "proportional";
  r.theta = 1000000.0;
  r.partial_rotary_factor = 0.25;
  for (const int64_t head_dim : {64, 48, 256}) {
    RopeTable table(r, head_dim, 512);
    ASSERT_EQ(table.half(), head_dim / 2);
    const int64_t rotated = head_dim / 8;  // 0.25 · head_dim / 2
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const double expected = i < rotated ? std::pow(1000000.0, -2.0 * double(i) / double(head_dim)) : 0.0;
      EXPECT_NEAR(table.inv_freq()[i], expected, 1e-6 * expected) << "head_dim " << head_dim << " i=" << i;
    }
    EXPECT_EQ(table.attention_scaling(), 1.0f);
    Tensor cos = Tensor::empty({2, head_dim / 2}, DType::f32), sin = Tensor::empty({2, head_dim / 2}, DType::f32);
    table.fill(37, 2, cos, sin);
    for (int64_t i = rotated; i < head_dim / 2; ++i) {
      EXPECT_EQ(cos.data<float>()[head_dim / 2 + i], 1.0f);
      EXPECT_EQ(sin.data<float>()[head_dim / 2 + i], 0.0f);
    }
  }
  r.factor = 4.0;  // divides every frequency
  RopeTable scaled(r, 32, 512);
  EXPECT_NEAR(scaled.inv_freq()[1], std::pow(1000000.0, -2.0 / 32.0) / 4.0, 1e-7);
}

}  // namespace
}  // namespace fathom
