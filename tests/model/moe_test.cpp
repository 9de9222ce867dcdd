// MoE routing and the sparse block against a direct computation.
#include "model/moe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;

TEST(MoeRouting, SoftmaxTopKAndRenormalization) {
  auto b = make_cpu_backend();
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f};
  Tensor l = Tensor::empty({1, 5}, DType::f32);
  std::copy(logits.begin(), logits.end(), l.data<float>());
  Tensor ids = Tensor::empty({1, 2}, DType::i32), w = Tensor::empty({1, 2}, DType::f32);
  b->route_top_k(l, 2, false, nullptr, ids, w);
  EXPECT_EQ(ids.data<int32_t>()[0], 1);
  EXPECT_EQ(ids.data<int32_t>()[1], 3);
  double z = 0;
  for (float x : logits) z += std::exp(double(x));
  EXPECT_NEAR(w.data<float>()[0], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(w.data<float>()[1], std::exp(1.5) / z, 1e-6);
  b->route_top_k(l, 2, true, nullptr, ids, w);
  EXPECT_NEAR(w.data<float>()[0] + w.data<float>()[1], 1.0, 1e-6);
  EXPECT_NEAR(w.data<float>()[0] / w.data<float>()[1], std::exp(0.5), 1e-5);
}

TEST(SparseMoe, MatchesDirectSumOverChosenExperts) {
  auto rng = fresh_rng();
  auto b = make_cpu_backend();
  const int64_t t = 9, hidden = 24, inter = 12, experts = 6, k = 2;
  SparseMoe moe;
  moe.top_k = k;
  moe.norm_topk_prob = true;
  moe.router = random_tensor({experts, hidden}, DType::f32, rng);
  for (int64_t e = 0; e < experts; ++e) {
    moe.experts.gate.push_back(random_tensor({inter, hidden}, DType::f32, rng, 0.3f));
    moe.experts.up.push_back(random_tensor({inter, hidden}, DType::f32, rng, 0.3f));
    moe.experts.down.push_back(random_tensor({hidden, inter}, DType::f32, rng, 0.3f));
  }
  Tensor x = random_tensor({t, hidden}, DType::f32, rng);
  Tensor y = Tensor::empty({t, hidden}, DType::f32);
  moe(*b, x, y, false);

  auto dot = [](const float* a, const float* c, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += double(a[i]) * c[i];
    return s;
  };
  for (int64_t i = 0; i < t; ++i) {
    const float* xi = x.data<float>() + i * hidden;
    std::vector<double> p(experts);
    double z = 0;
    for (int64_t e = 0; e < experts; ++e) z += p[e] = std::exp(dot(xi, moe.router.data<float>() + e * hidden, hidden));
    std::vector<int64_t> order(experts);
    for (int64_t e = 0; e < experts; ++e) order[e] = e;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return p[a] > p[c]; });
    const double norm = p[order[0]] + p[order[1]];
    std::vector<double> want(hidden, 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const size_t ex = size_t(order[j]);
      std::vector<double> act(inter);
      for (int64_t r = 0; r < inter; ++r) {
        const double g = dot(xi, moe.experts.gate[ex].data<float>() + r * hidden, hidden);
        const double u = dot(xi, moe.experts.up[ex].data<float>() + r * hidden, hidden);
        act[r] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t d = 0; d < hidden; ++d) {
        double s = 0;
        for (int64_t r = 0; r < inter; ++r) s += act[r] * moe.experts.down[ex].data<float>()[d * inter + r];
        want[d] += p[order[j]] / norm * s;
      }
    }
    for (int64_t d = 0; d < hidden; ++d) EXPECT_NEAR(y.data<float>()[i * hidden + d], want[d], 1e-4) << i << "," << d;
  }
}

}  // namespace
}  // namespace fathom
