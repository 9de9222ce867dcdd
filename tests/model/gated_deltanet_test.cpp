// Gated DeltaNet kernels against plain references on fresh random inputs: the
// chunked delta rule equals the token-by-token recurrence (any length, any
// starting state), the recurrence equals a direct double-precision evaluation,
// the conv carries its state across split calls, and a whole layer gives the
// same output whether a sequence arrives at once or in pieces.
#include "model/gated_deltanet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;
using testing::relative_error;

DeltaNetDims small_dims() {
  DeltaNetDims d;
  d.num_key_heads = 2;
  d.num_value_heads = 6;  // three value heads per key head
  d.key_head_dim = 16;
  d.value_head_dim = 12;
  d.conv_kernel = 4;
  return d;
}

// Inputs shaped like the layer's after the conv: q, k L2-normalised, q scaled,
// g in a realistic (−8, 0) range, beta in (0, 1).
struct RuleData {
  std::vector<float> q, k, v, g, beta;
  int64_t t;
  DeltaRuleInputs inputs(const DeltaNetDims& d) const {
    DeltaRuleInputs in;
    in.q = q.data();
    in.k = k.data();
    in.v = v.data();
    in.g = g.data();
    in.beta = beta.data();
    in.t = t;
    in.q_stride = in.k_stride = d.key_dim();
    in.v_stride = d.value_dim();
    return in;
  }
};

RuleData random_rule_data(const DeltaNetDims& d, int64_t t, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  RuleData r;
  r.t = t;
  r.q.resize(size_t(t * d.key_dim()));
  r.k.resize(size_t(t * d.key_dim()));
  r.v.resize(size_t(t * d.value_dim()));
  r.g.resize(size_t(t * d.num_value_heads));
  r.beta.resize(size_t(t * d.num_value_heads));
  auto unit_rows = [&](std::vector<float>& x, float scale) {
    for (auto& e : x) e = normal(rng);
    for (size_t row = 0; row < x.size(); row += size_t(d.key_head_dim)) {
      double ss = 0;
      for (int64_t i = 0; i < d.key_head_dim; ++i) ss += double(x[row + i]) * x[row + i];
      for (int64_t i = 0; i < d.key_head_dim; ++i) x[row + i] = float(x[row + i] / std::sqrt(ss) * scale);
    }
  };
  unit_rows(r.q, 1.0f / std::sqrt(float(d.key_head_dim)));
  unit_rows(r.k, 1.0f);
  for (auto& e : r.v) e = normal(rng);
  // Mostly gentle decays, some strong ones (exp(−8) ≈ 3e-4) so chunk-level
  // cumulative decays underflow-test the formulation.
  for (auto& e : r.g) e = unit(rng) < 0.1f ? -8.0f * unit(rng) : -0.3f * unit(rng);
  for (auto& e : r.beta) e = unit(rng);
  return r;
}

std::vector<float> random_state(const DeltaNetDims& d, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> s(size_t(d.num_value_heads * d.key_head_dim * d.value_head_dim));
  for (auto& e : s) e = normal(rng);
  return s;
}

// The rule written out directly in double precision, one head at a time.
void reference_rule(const DeltaNetDims& d, const DeltaRuleInputs& in, std::vector<double>& state,
                    std::vector<double>& out) {
  const int64_t hv = d.num_value_heads, dk = d.key_head_dim, dv = d.value_head_dim;
  const int64_t group = hv / d.num_key_heads;
  out.assign(size_t(in.t * hv * dv), 0.0);
  for (int64_t ti = 0; ti < in.t; ++ti)
    for (int64_t h = 0; h < hv; ++h) {
      double* s = state.data() + h * dk * dv;
      const float* q = in.q + ti * in.q_stride + (h / group) * dk;
      const float* k = in.k + ti * in.k_stride + (h / group) * dk;
      const float* v = in.v + ti * in.v_stride + h * dv;
      const double decay = std::exp(double(in.g[ti * hv + h])), beta = in.beta[ti * hv + h];
      for (int64_t x = 0; x < dk * dv; ++x) s[x] *= decay;
      for (int64_t b = 0; b < dv; ++b) {
        double pred = 0;
        for (int64_t a = 0; a < dk; ++a) pred += s[a * dv + b] * k[a];
        const double delta = beta * (v[b] - pred);
        for (int64_t a = 0; a < dk; ++a) s[a * dv + b] += k[a] * delta;
      }
      for (int64_t b = 0; b < dv; ++b)
        for (int64_t a = 0; a < dk; ++a) out[size_t((ti * hv + h) * dv + b)] += s[a * dv + b] * q[a];
    }
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  return relative_error(a.data(), b.data(), int64_t(a.size()));
}

TEST(GatedDeltaRule, RecurrenceMatchesDoublePrecisionReference) {
  uint64_t seed = 0;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const DeltaNetDims d = small_dims();
  const RuleData data = random_rule_data(d, 37, rng);
  std::vector<float> state = random_state(d, rng);
  std::vector<double> ref_state(state.begin(), state.end()), ref_out;
  std::vector<float> out(size_t(data.t * d.value_dim()));
  gated_delta_rule_recurrent(d, data.inputs(d), state.data(), out.data());
  reference_rule(d, data.inputs(d), ref_state, ref_out);
  EXPECT_LT(rel(out, std::vector<float>(ref_out.begin(), ref_out.end())), 1e-5);
  EXPECT_LT(rel(state, std::vector<float>(ref_state.begin(), ref_state.end())), 1e-5);
}

TEST(GatedDeltaRule, ChunkedMatchesRecurrenceFromNonZeroState) {
  uint64_t seed = 0;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const DeltaNetDims d = small_dims();
  for (int64_t t : {1, 2, 7, 63, 64, 65, 150}) {
    for (int64_t chunk : {int64_t(16), kDeltaRuleChunk}) {
      SCOPED_TRACE("t " + std::to_string(t) + " chunk " + std::to_string(chunk));
      const RuleData data = random_rule_data(d, t, rng);
      const std::vector<float> start = random_state(d, rng);
      std::vector<float> s_rec = start, s_chunk = start;
      std::vector<float> o_rec(size_t(t * d.value_dim())), o_chunk(o_rec.size());
      gated_delta_rule_recurrent(d, data.inputs(d), s_rec.data(), o_rec.data());
      gated_delta_rule_chunked(d, data.inputs(d), chunk, s_chunk.data(), o_chunk.data());
      EXPECT_LT(rel(o_chunk, o_rec), 1e-5);
      EXPECT_LT(rel(s_chunk, s_rec), 1e-5);
    }
  }
}

TEST(GatedDeltaRule, ChunkedPrefillsCompose) {
  // Two chunked calls (a prefill continuing from the first one's state) equal one.
  uint64_t seed = 0;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const DeltaNetDims d = small_dims();
  const int64_t t = 100, split = 71;
  const RuleData data = random_rule_data(d, t, rng);
  const std::vector<float> start = random_state(d, rng);
  std::vector<float> s_whole = start, s_split = start;
  std::vector<float> o_whole(size_t(t * d.value_dim())), o_split(o_whole.size());
  gated_delta_rule_chunked(d, data.inputs(d), kDeltaRuleChunk, s_whole.data(), o_whole.data());
  DeltaRuleInputs head = data.inputs(d), tail = data.inputs(d);
  head.t = split;
  tail.t = t - split;
  tail.q += split * tail.q_stride;
  tail.k += split * tail.k_stride;
  tail.v += split * tail.v_stride;
  tail.g += split * d.num_value_heads;
  tail.beta += split * d.num_value_heads;
  gated_delta_rule_chunked(d, head, kDeltaRuleChunk, s_split.data(), o_split.data());
  gated_delta_rule_chunked(d, tail, kDeltaRuleChunk, s_split.data(), o_split.data() + split * d.value_dim());
  EXPECT_LT(rel(o_split, o_whole), 1e-5);
  EXPECT_LT(rel(s_split, s_whole), 1e-5);
}

TEST(CausalConv1d, MatchesDirectConvolutionAcrossSplitCalls) {
  uint64_t seed = 0;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t channels = 10, kernel = 4, t = 13;
  const Tensor x = random_tensor({t, channels}, DType::f32, rng);
  const Tensor w = random_tensor({channels, kernel}, DType::f32, rng, 0.5f);
  const Tensor past = random_tensor({channels, kernel - 1}, DType::f32, rng);  // inputs before token 0
  // Direct: out[t][c] = silu(Σ_j w[c][j] · input[t − (K − 1) + j][c]) over past ++ x.
  std::vector<float> expect(size_t(t * channels));
  for (int64_t ti = 0; ti < t; ++ti)
    for (int64_t c = 0; c < channels; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t src = ti - (kernel - 1) + j;
        const float in = src < 0 ? past.data<float>()[c * (kernel - 1) + (kernel - 1) + src]
                                 : x.data<float>()[src * channels + c];
        acc += double(w.data<float>()[c * kernel + j]) * in;
      }
      expect[size_t(ti * channels + c)] = float(acc / (1.0 + std::exp(-acc)));
    }
  // Pieces of 1, 2 (shorter than the window), 6 and 4 tokens.
  std::vector<float> state(past.data<float>(), past.data<float>() + past.numel());
  std::vector<float> got(expect.size());
  int64_t begin = 0;
  for (int64_t n : {1, 2, 6, 4}) {
    causal_conv1d_silu(x.data<float>() + begin * channels, n, channels, channels, w.data<float>(), kernel,
                       state.data(), got.data() + begin * channels);
    begin += n;
  }
  ASSERT_EQ(begin, t);
  EXPECT_LT(rel(got, expect), 1e-6);
  // The state ends as the last kernel − 1 inputs, oldest first.
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t j = 0; j < kernel - 1; ++j)
      EXPECT_EQ(state[size_t(c * (kernel - 1) + j)], x.data<float>()[(t - (kernel - 1) + j) * channels + c]);
}

// A whole layer with random weights: a prefill then decode steps equal one
// prefill of everything (conv and recurrent state both carried).
GatedDeltaNet random_layer(const DeltaNetDims& d, int64_t hidden, bool fused, std::mt19937_64& rng) {
  const float s = 1.0f / std::sqrt(float(hidden));
  GatedDeltaNet n;
  n.dims = d;
  if (fused) {
    n.in_qkvz = Linear{random_tensor({2 * d.key_dim() + 2 * d.value_dim(), hidden}, DType::f32, rng, s), {}};
    n.in_ba = Linear{random_tensor({2 * d.num_value_heads, hidden}, DType::f32, rng, s), {}};
  } else {
    n.in_qkv = Linear{random_tensor({d.conv_dim(), hidden}, DType::f32, rng, s), {}};
    n.in_z = Linear{random_tensor({d.value_dim(), hidden}, DType::f32, rng, s), {}};
    n.in_b = Linear{random_tensor({d.num_value_heads, hidden}, DType::f32, rng, s), {}};
    n.in_a = Linear{random_tensor({d.num_value_heads, hidden}, DType::f32, rng, s), {}};
  }
  n.conv_weight = random_tensor({d.conv_dim(), d.conv_kernel}, DType::f32, rng, 0.5f);
  n.neg_a = random_tensor({d.num_value_heads}, DType::f32, rng);
  for (int64_t i = 0; i < d.num_value_heads; ++i) n.neg_a.data<float>()[i] = -std::exp(n.neg_a.data<float>()[i]);
  n.dt_bias = random_tensor({d.num_value_heads}, DType::f32, rng);
  n.norm = random_tensor({d.value_head_dim}, DType::f32, rng);
  n.out = Linear{random_tensor({hidden, d.value_dim()}, DType::f32, rng, 1.0f / std::sqrt(float(d.value_dim()))), {}};
  return n;
}

TEST(GatedDeltaNetLayer, PiecewiseEqualsWhole) {
  uint64_t seed = 0;
  auto rng = fresh_rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto b = make_cpu_backend();
  const DeltaNetDims d = small_dims();
  const int64_t hidden = 40, t = 90;
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused projections" : "separate projections");
    const GatedDeltaNet net = random_layer(d, hidden, fused, rng);
    const Tensor x = random_tensor({t, hidden}, DType::f32, rng);
    auto run = [&](RecurrentState& state, int64_t begin, int64_t n, float* dst) {
      GatedDeltaNetScratch scratch(n, d, fused);
      Tensor out = Tensor::empty({n, hidden}, DType::f32);
      run_gated_deltanet(*b, net, x.slice_rows(begin, begin + n), state, scratch, out, false);
      std::copy(out.data<float>(), out.data<float>() + out.numel(), dst);
    };
    RecurrentState whole_state(d.conv_dim(), d.conv_kernel, d.num_value_heads, d.key_head_dim, d.value_head_dim);
    RecurrentState split_state(d.conv_dim(), d.conv_kernel, d.num_value_heads, d.key_head_dim, d.value_head_dim);
    std::vector<float> whole(size_t(t * hidden)), split(whole.size());
    run(whole_state, 0, t, whole.data());
    // A 70-token prefill (a full chunk and a partial one), 2 and 1 token, a
    // 7-token piece, then decode steps.
    int64_t begin = 0;
    for (int64_t n : {70, 2, 1, 7}) {
      run(split_state, begin, n, split.data() + begin * hidden);
      begin += n;
    }
    for (; begin < t; ++begin) run(split_state, begin, 1, split.data() + begin * hidden);
    EXPECT_EQ(split_state.length, t);
    for (int64_t i = 0; i < t; ++i)
      EXPECT_LT(relative_error(split.data() + i * hidden, whole.data() + i * hidden, hidden), 1e-5) << "row " << i;
  }
}

}  // namespace
}  // namespace fathom
