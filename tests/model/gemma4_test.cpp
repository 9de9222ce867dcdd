// Gemma 4's pieces on their own, against plain double-precision references on
// fresh random inputs: proportional RoPE applied over the whole head_dim, the
// MoE router (norm, scales, top-k, per-expert scale) and experts that run only
// for the tokens routed to them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/backend.h"
#include "model/gemma4_moe.h"
#include "model/rope.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;
using testing::relative_error;

// Proportional RoPE rotates feature i with feature i + head_dim / 2 for the
// first rotated pairs and leaves the others as they are.
TEST(Gemma4, ProportionalRopeRotatesAcrossTheWholeHeadDim) {
  auto rng = fresh_rng();
  const int64_t head_dim = 48, half = 24, heads = 3, t = 4, first = 11;
  RopeConfig r;
  r.type = "proportional";
  r.theta = 1000000.0;
  r.partial_rotary_factor = 0.25;
  RopeTable table(r, head_dim, 512);
  Tensor cos = Tensor::empty({t, half}, DType::f32), sin = Tensor::empty({t, half}, DType::f32);
  table.fill(first, t, cos, sin);
  const Tensor x = random_tensor({t, heads, head_dim}, DType::f32, rng);
  Tensor y = random_tensor({t, heads, head_dim}, DType::f32, rng);
  std::copy(x.data<float>(), x.data<float>() + x.numel(), y.data<float>());
  make_cpu_backend()->rope(y, cos, sin);

  const int64_t rotated = 6;  // int(0.25 · 48 // 2)
  for (int64_t p = 0; p < t; ++p)
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = x.data<float>() + (p * heads + h) * head_dim;
      const float* out = y.data<float>() + (p * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double f = i < rotated ? std::pow(1000000.0, -2.0 * double(i) / double(head_dim)) : 0.0;
        const double a = double(first + p) * f;
        const double lo = in[i] * std::cos(a) - in[i + half] * std::sin(a);
        const double hi = in[i + half] * std::cos(a) + in[i] * std::sin(a);
        EXPECT_NEAR(out[i], lo, 1e-4) << "pos " << p << " head " << h << " i " << i;
        EXPECT_NEAR(out[i + half], hi, 1e-4) << "pos " << p << " head " << h << " i " << i;
        if (i >= rotated) {
          EXPECT_EQ(out[i], in[i]);
          EXPECT_EQ(out[i + half], in[i + half]);
        }
      }
    }
}

struct HandRouting {
  std::vector<int32_t> experts;
  std::vector<double> weights;
  std::vector<bool> clear;  // the k-th and (k+1)-th probabilities are far enough apart to compare choices
};

// The router in double: scale-less RMSNorm, · scale · hidden^-0.5, projection,
// softmax, top-k, renormalize, · per_expert_scale.
HandRouting hand_route(const Tensor& x, const Gemma4Router& r, float eps) {
  const int64_t t = x.dim(0), hidden = x.dim(1), e = r.num_experts(), k = r.top_k;
  HandRouting out;
  for (int64_t i = 0; i < t; ++i) {
    const float* row = x.data<float>() + i * hidden;
    double ms = 0.0;
    for (int64_t d = 0; d < hidden; ++d) ms += double(row[d]) * row[d];
    const double inv = 1.0 / std::sqrt(ms / double(hidden) + eps);
    std::vector<double> logits(static_cast<size_t>(e), 0.0), p(static_cast<size_t>(e));
    for (int64_t ex = 0; ex < e; ++ex)
      for (int64_t d = 0; d < hidden; ++d)
        logits[ex] += double(row[d]) * inv * r.input_scale.data<float>()[d] / std::sqrt(double(hidden)) *
                      r.proj.data<float>()[ex * hidden + d];
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (int64_t ex = 0; ex < e; ++ex) sum += p[ex] = std::exp(logits[ex] - mx);
    for (double& v : p) v /= sum;
    std::vector<int32_t> order(static_cast<size_t>(e));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    double total = 0.0;
    for (int64_t j = 0; j < k; ++j) total += p[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      out.experts.push_back(order[j]);
      out.weights.push_back(p[order[j]] / total * r.per_expert_scale.data<float>()[order[j]]);
    }
    out.clear.push_back(k == e || p[order[k - 1]] - p[order[k]] > 1e-5);
  }
  return out;
}

Gemma4Router random_router(int64_t hidden, int64_t experts, int64_t top_k, std::mt19937_64& rng) {
  Gemma4Router r;
  r.unit = Tensor::empty({hidden}, DType::f32);
  std::fill_n(r.unit.data<float>(), hidden, 1.0f);
  r.input_scale = random_tensor({hidden}, DType::f32, rng);
  r.proj = random_tensor({experts, hidden}, DType::f32, rng, 4.0f);  // spread the probabilities
  r.per_expert_scale = random_tensor({experts}, DType::f32, rng);
  r.top_k = top_k;
  r.eps = 1e-6f;
  return r;
}

TEST(Gemma4, RouterPicksTopKAndScalesByExpert) {
  auto rng = fresh_rng();
  const int64_t t = 9, hidden = 40, experts = 6, k = 2;
  const Gemma4Router r = random_router(hidden, experts, k, rng);
  const Tensor x = random_tensor({t, hidden}, DType::f32, rng, 3.0f);
  auto backend = make_cpu_backend();
  const Gemma4Routing got = r.route(*backend, x);
  const HandRouting want = hand_route(x, r, r.eps);
  ASSERT_EQ(got.ids.shape(), (std::vector<int64_t>{t, k}));
  ASSERT_EQ(got.weights.shape(), (std::vector<int64_t>{t, k}));
  int compared = 0;
  for (int64_t i = 0; i < t; ++i) {
    if (!want.clear[i]) continue;
    ++compared;
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(got.ids.data<int32_t>()[i * k + j], want.experts[i * k + j]) << "token " << i << " choice " << j;
      EXPECT_NEAR(got.weights.data<float>()[i * k + j], want.weights[i * k + j], 1e-5)
          << "token " << i << " choice " << j;
    }
  }
  EXPECT_GE(compared, t / 2);
}

double gelu_tanh(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}

// Experts nobody picks hold NaN weights: running them would poison the output.
TEST(Gemma4, ExpertsRunOnlyForTheirRoutedTokens) {
  auto rng = fresh_rng();
  const int64_t t = 7, hidden = 24, inter = 10, experts = 5, k = 2;
  Gemma4Experts m;
  m.experts.act = GateActivation::gelu_tanh;
  for (int64_t e = 0; e < experts; ++e) {
    m.experts.gate.push_back(random_tensor({inter, hidden}, DType::f32, rng, 0.3f));
    m.experts.up.push_back(random_tensor({inter, hidden}, DType::f32, rng, 0.3f));
    m.experts.down.push_back(random_tensor({hidden, inter}, DType::f32, rng, 0.3f));
  }
  const int32_t unused[] = {1, 4};
  for (int32_t e : unused)
    for (Tensor* w : {&m.experts.gate[size_t(e)], &m.experts.up[size_t(e)], &m.experts.down[size_t(e)]})
      std::fill(w->data<float>(), w->data<float>() + w->numel(), std::numeric_limits<float>::quiet_NaN());

  Gemma4Routing routing{Tensor::empty({t, k}, DType::i32), Tensor::empty({t, k}, DType::f32)};
  const int32_t used[] = {0, 2, 3};
  std::uniform_int_distribution<int> pick(0, 2);
  std::uniform_real_distribution<float> weight(0.1f, 1.5f);
  for (int64_t i = 0; i < t; ++i) {
    const int a = pick(rng);
    routing.ids.data<int32_t>()[i * k] = used[a];
    routing.ids.data<int32_t>()[i * k + 1] = used[(a + 1 + pick(rng) % 2) % 3];
    routing.weights.data<float>()[i * k] = weight(rng);
    routing.weights.data<float>()[i * k + 1] = weight(rng);
  }

  const Tensor x = random_tensor({t, hidden}, DType::f32, rng);
  Tensor y = Tensor::empty({t, hidden}, DType::f32);
  auto backend = make_cpu_backend();
  m(*backend, x, routing, y, false);

  std::vector<float> want(static_cast<size_t>(t * hidden), 0.0f);
  for (int64_t i = 0; i < t; ++i) {
    const float* row = x.data<float>() + i * hidden;
    std::vector<double> acc(static_cast<size_t>(hidden), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const size_t e = size_t(routing.ids.data<int32_t>()[i * k + j]);
      std::vector<double> act(static_cast<size_t>(inter));
      for (int64_t n = 0; n < inter; ++n) {
        double g = 0.0, u = 0.0;
        for (int64_t d = 0; d < hidden; ++d) {
          g += double(m.experts.gate[e].data<float>()[n * hidden + d]) * row[d];
          u += double(m.experts.up[e].data<float>()[n * hidden + d]) * row[d];
        }
        act[n] = gelu_tanh(g) * u;
      }
      for (int64_t d = 0; d < hidden; ++d) {
        double o = 0.0;
        for (int64_t n = 0; n < inter; ++n) o += double(m.experts.down[e].data<float>()[d * inter + n]) * act[n];
        acc[d] += o * routing.weights.data<float>()[i * k + j];
      }
    }
    for (int64_t d = 0; d < hidden; ++d) want[i * hidden + d] = float(acc[d]);
  }
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_TRUE(std::isfinite(y.data<float>()[i])) << "element " << i;
  EXPECT_LE(relative_error(y.data<float>(), want.data(), t * hidden), 1e-5);
}

}  // namespace
}  // namespace fathom
