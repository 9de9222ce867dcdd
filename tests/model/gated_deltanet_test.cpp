// Gated DeltaNet kernels against plain references on fresh random inputs: the
// chunked delta rule equals the token-by-token recurrence (any length, any
// starting state), the recurrence equals a direct double-precision evaluation,
// the conv carries its state across split calls, and a whole layer gives the
// same output whether a sequence arrives at once or in pieces; a speculative
// step resolves to the state of exactly the kept tokens.
#include "model/gated_deltanet.h"

#include "backend/cpu/delta_rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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
  cpu::DeltaRuleInputs inputs(const DeltaNetDims& d) const {
    cpu::DeltaRuleInputs in;
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
void reference_rule(const DeltaNetDims& d, const cpu::DeltaRuleInputs& in, std::vector<double>& state,
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
  auto rng = fresh_rng();
  const DeltaNetDims d = small_dims();
  const RuleData data = random_rule_data(d, 37, rng);
  std::vector<float> state = random_state(d, rng);
  std::vector<double> ref_state(state.begin(), state.end()), ref_out;
  std::vector<float> out(size_t(data.t * d.value_dim()));
  cpu::gated_delta_rule_recurrent(delta_rule_shape(d), data.inputs(d), state.data(), out.data());
  reference_rule(d, data.inputs(d), ref_state, ref_out);
  EXPECT_LT(rel(out, std::vector<float>(ref_out.begin(), ref_out.end())), 1e-5);
  EXPECT_LT(rel(state, std::vector<float>(ref_state.begin(), ref_state.end())), 1e-5);
}

TEST(GatedDeltaRule, ChunkedMatchesRecurrenceFromNonZeroState) {
  auto rng = fresh_rng();
  const DeltaNetDims d = small_dims();
  for (int64_t t : {1, 2, 7, 63, 64, 65, 150}) {
    for (int64_t chunk : {int64_t(16), kDeltaRuleChunk}) {
      SCOPED_TRACE("t " + std::to_string(t) + " chunk " + std::to_string(chunk));
      const RuleData data = random_rule_data(d, t, rng);
      const std::vector<float> start = random_state(d, rng);
      std::vector<float> s_rec = start, s_chunk = start;
      std::vector<float> o_rec(size_t(t * d.value_dim())), o_chunk(o_rec.size());
      cpu::gated_delta_rule_recurrent(delta_rule_shape(d), data.inputs(d), s_rec.data(), o_rec.data());
      cpu::gated_delta_rule_chunked(delta_rule_shape(d), data.inputs(d), chunk, s_chunk.data(), o_chunk.data());
      EXPECT_LT(rel(o_chunk, o_rec), 1e-5);
      EXPECT_LT(rel(s_chunk, s_rec), 1e-5);
    }
  }
}

TEST(GatedDeltaRule, CopiesAreTheStatesAfterEachToken) {
  // Copying the state out as the recurrence passes each token changes nothing
  // in the arithmetic: copy i equals, bit for bit, the state after running
  // only the first i + 1 tokens.
  auto rng = fresh_rng();
  const DeltaNetDims d = small_dims();
  const int64_t t = 7, n = d.num_value_heads * d.key_head_dim * d.value_head_dim;
  const RuleData data = random_rule_data(d, t, rng);
  const std::vector<float> start = random_state(d, rng);
  std::vector<float> state = start, plain = start, copies(size_t(t * n), -1.0f);
  std::vector<float*> slots(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) slots[size_t(i)] = i == 3 ? nullptr : copies.data() + i * n;  // null: no copy
  std::vector<float> out(size_t(t * d.value_dim())), plain_out(out.size());
  cpu::gated_delta_rule_recurrent(delta_rule_shape(d), data.inputs(d), state.data(), out.data(), slots.data());
  cpu::gated_delta_rule_recurrent(delta_rule_shape(d), data.inputs(d), plain.data(), plain_out.data());
  EXPECT_EQ(state, plain);
  EXPECT_EQ(out, plain_out);
  for (int64_t i = 0; i < t; ++i) {
    SCOPED_TRACE("token " + std::to_string(i));
    cpu::DeltaRuleInputs prefix = data.inputs(d);
    prefix.t = i + 1;
    std::vector<float> s = start, o(size_t(prefix.t * d.value_dim()));
    cpu::gated_delta_rule_recurrent(delta_rule_shape(d), prefix, s.data(), o.data());
    if (i == 3) {
      EXPECT_TRUE(std::all_of(copies.begin() + i * n, copies.begin() + (i + 1) * n, [](float x) { return x == -1.0f; }));
      continue;
    }
    EXPECT_EQ(std::memcmp(copies.data() + i * n, s.data(), size_t(n) * sizeof(float)), 0);
  }
}

TEST(GatedDeltaRule, ChunkedPrefillsCompose) {
  // Two chunked calls (a prefill continuing from the first one's state) equal one.
  auto rng = fresh_rng();
  const DeltaNetDims d = small_dims();
  const int64_t t = 100, split = 71;
  const RuleData data = random_rule_data(d, t, rng);
  const std::vector<float> start = random_state(d, rng);
  std::vector<float> s_whole = start, s_split = start;
  std::vector<float> o_whole(size_t(t * d.value_dim())), o_split(o_whole.size());
  cpu::gated_delta_rule_chunked(delta_rule_shape(d), data.inputs(d), kDeltaRuleChunk, s_whole.data(), o_whole.data());
  cpu::DeltaRuleInputs head = data.inputs(d), tail = data.inputs(d);
  head.t = split;
  tail.t = t - split;
  tail.q += split * tail.q_stride;
  tail.k += split * tail.k_stride;
  tail.v += split * tail.v_stride;
  tail.g += split * d.num_value_heads;
  tail.beta += split * d.num_value_heads;
  cpu::gated_delta_rule_chunked(delta_rule_shape(d), head, kDeltaRuleChunk, s_split.data(), o_split.data());
  cpu::gated_delta_rule_chunked(delta_rule_shape(d), tail, kDeltaRuleChunk, s_split.data(), o_split.data() + split * d.value_dim());
  EXPECT_LT(rel(o_split, o_whole), 1e-5);
  EXPECT_LT(rel(s_split, s_whole), 1e-5);
}

TEST(CausalConv1d, MatchesDirectConvolutionAcrossSplitCalls) {
  auto rng = fresh_rng();
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
    cpu::causal_conv1d_silu(x.data<float>() + begin * channels, n, channels, channels, w.data<float>(), kernel,
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
GatedDeltaNet random_layer(const DeltaNetDims& d, int64_t hidden, std::mt19937_64& rng) {
  const float s = 1.0f / std::sqrt(float(hidden));
  GatedDeltaNet n;
  n.dims = d;
  n.in_qkv = Linear{random_tensor({d.conv_dim(), hidden}, DType::f32, rng, s), {}};
  n.in_z = Linear{random_tensor({d.value_dim(), hidden}, DType::f32, rng, s), {}};
  n.in_b = Linear{random_tensor({d.num_value_heads, hidden}, DType::f32, rng, s), {}};
  n.in_a = Linear{random_tensor({d.num_value_heads, hidden}, DType::f32, rng, s), {}};
  n.conv_weight = random_tensor({d.conv_dim(), d.conv_kernel}, DType::f32, rng, 0.5f);
  n.neg_a = random_tensor({d.num_value_heads}, DType::f32, rng);
  for (int64_t i = 0; i < d.num_value_heads; ++i) n.neg_a.data<float>()[i] = -std::exp(n.neg_a.data<float>()[i]);
  n.dt_bias = random_tensor({d.num_value_heads}, DType::f32, rng);
  n.norm = random_tensor({d.value_head_dim}, DType::f32, rng);
  n.out = Linear{random_tensor({hidden, d.value_dim()}, DType::f32, rng, 1.0f / std::sqrt(float(d.value_dim()))), {}};
  return n;
}

TEST(GatedDeltaNetLayer, PiecewiseEqualsWhole) {
  auto rng = fresh_rng();
  auto b = make_cpu_backend();
  const DeltaNetDims d = small_dims();
  const int64_t hidden = 40, t = 90;
  {
    const GatedDeltaNet net = random_layer(d, hidden, rng);
    const Tensor x = random_tensor({t, hidden}, DType::f32, rng);
    auto run = [&](RecurrentState& state, int64_t begin, int64_t n, float* dst) {
      GatedDeltaNetScratch scratch(*b, n, d);
      Tensor out = Tensor::empty({n, hidden}, DType::f32);
      run_gated_deltanet(*b, net, x.slice_rows(begin, begin + n), state, scratch, out, false);
      std::copy(out.data<float>(), out.data<float>() + out.numel(), dst);
    };
    RecurrentState whole_state(b, d.conv_dim(), d.conv_kernel, d.num_value_heads, d.key_head_dim, d.value_head_dim);
    RecurrentState split_state(b, d.conv_dim(), d.conv_kernel, d.num_value_heads, d.key_head_dim, d.value_head_dim);
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

// A deep copy (Tensor copies share storage).
RecurrentState copy_of(const RecurrentState& r, const DeltaNetDims& d) {
  RecurrentState c(make_cpu_backend(), d.conv_dim(), d.conv_kernel, d.num_value_heads, d.key_head_dim, d.value_head_dim);
  std::copy_n(r.conv.data<float>(), r.conv.numel(), c.conv.data<float>());
  std::copy_n(r.matrix.data<float>(), r.matrix.numel(), c.matrix.data<float>());
  c.length = r.length;
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// A verify step of `rows` tokens, resolved to `kept`, against the kept tokens
// run on their own. "Equal" means two things here:
// - bit for bit against the kept tokens decoded one at a time: a step runs
//   the recurrence token by token like decode, copies the matrix out after
//   each position (data movement only) and rebuilds the conv window from its
//   inputs, so nothing is computed differently;
// - within rounding (relative error < 1e-5) against the kept tokens run as
//   one prefill, which takes the chunked rule (a different summation order).
TEST(GatedDeltaNetLayer, AVerifyStepResolvesToTheStateOfTheKeptTokens) {
  auto rng = fresh_rng();
  auto b = make_cpu_backend();
  const DeltaNetDims d = small_dims();
  const int64_t hidden = 40, prompt = 20, rows = 6;
  {
    const GatedDeltaNet net = random_layer(d, hidden, rng);
    const Tensor x = random_tensor({prompt + rows + 1, hidden}, DType::f32, rng);
    auto run = [&](RecurrentState& state, int64_t begin, int64_t n) {
      GatedDeltaNetScratch scratch(*b, n, d);
      Tensor out = Tensor::empty({n, hidden}, DType::f32);
      run_gated_deltanet(*b, net, x.slice_rows(begin, begin + n), state, scratch, out, false);
      return out;
    };
    RecurrentState start(b, d.conv_dim(), d.conv_kernel, d.num_value_heads, d.key_head_dim, d.value_head_dim);
    run(start, 0, prompt);  // a chunked prefill: the step starts from a non-zero state and window
    const int64_t base_bytes = start.bytes();
    // Every row decoded one at a time: the states and outputs a plain run reaches.
    std::vector<RecurrentState> decoded;
    std::vector<Tensor> decoded_out;
    RecurrentState plain = copy_of(start, d);
    for (int64_t i = 0; i < rows; ++i) {
      decoded_out.push_back(run(plain, prompt + i, 1));
      decoded.push_back(copy_of(plain, d));
    }
    for (int64_t kept = 1; kept <= rows; ++kept) {
      for (bool split : {false, true}) {  // one step call, or two (2 + 4 rows)
        SCOPED_TRACE("kept " + std::to_string(kept) + (split ? ", step in two calls" : ""));
        RecurrentState spec = copy_of(start, d);
        spec.begin_step(rows);
        EXPECT_TRUE(spec.in_step());
        const int64_t matrix_bytes = int64_t(spec.matrix.nbytes()), conv_bytes = int64_t(spec.conv.nbytes());
        EXPECT_EQ(spec.bytes(), base_bytes + (rows - 1) * matrix_bytes + conv_bytes + rows * d.conv_dim() * 4);
        std::vector<Tensor> outs;
        if (split) {
          outs.push_back(run(spec, prompt, 2));
          outs.push_back(run(spec, prompt + 2, rows - 2));
        } else {
          outs.push_back(run(spec, prompt, rows));
        }
        // The step's outputs are decode's, row for row.
        int64_t row = 0;
        for (const Tensor& o : outs)
          for (int64_t i = 0; i < o.dim(0); ++i, ++row)
            EXPECT_EQ(std::memcmp(o.data<float>() + i * hidden, decoded_out[size_t(row)].data<float>(),
                                  size_t(hidden) * sizeof(float)),
                      0)
                << "row " << row;
        spec.resolve_step(kept);
        EXPECT_FALSE(spec.in_step());
        EXPECT_EQ(spec.length, prompt + kept);
        EXPECT_EQ(spec.bytes(), base_bytes);
        const RecurrentState& want = decoded[size_t(kept - 1)];
        EXPECT_TRUE(same_bits(spec.matrix, want.matrix));
        EXPECT_TRUE(same_bits(spec.conv, want.conv));
        // The kept tokens as one prefill (chunked rule): equal within rounding.
        RecurrentState prefill = copy_of(start, d);
        run(prefill, prompt, kept);
        EXPECT_LT(relative_error(spec.matrix.data<float>(), prefill.matrix.data<float>(), spec.matrix.numel()), 1e-5);
        EXPECT_TRUE(same_bits(spec.conv, prefill.conv));  // the window is data, never rounded
        // And the sequence goes on from there as the plain run does.
        RecurrentState after = copy_of(want, d);
        const Tensor next_spec = run(spec, prompt + kept, 1), next_plain = run(after, prompt + kept, 1);
        EXPECT_TRUE(same_bits(next_spec, next_plain));
      }
    }
  }
}

TEST(RecurrentStateStep, MisuseIsAnErrorAndResetDropsTheStep) {
  const DeltaNetDims d = small_dims();
  auto b = make_cpu_backend();
  RecurrentState s(b, d.conv_dim(), d.conv_kernel, d.num_value_heads, d.key_head_dim, d.value_head_dim);
  const int64_t base = s.bytes();
  Tensor rows = Tensor::empty({4, d.conv_dim()}, DType::f32);
  b->fill(rows, 1.0f);
  const Tensor row = rows.slice_rows(0, 1);
  EXPECT_THROW(s.resolve_step(1), Error);  // no step open
  EXPECT_THROW(s.copy_after(1), Error);
  EXPECT_THROW(s.record_conv_inputs(*b, row), Error);
  EXPECT_THROW(s.begin_step(0), Error);
  s.begin_step(3);
  EXPECT_THROW(s.begin_step(3), Error);  // one step at a time
  EXPECT_THROW(s.copy_after(0), Error);
  EXPECT_THROW(s.copy_after(4), Error);
  EXPECT_EQ(s.copy_after(3), nullptr);  // the last position's matrix is `matrix` itself
  EXPECT_THROW(s.record_conv_inputs(*b, rows), Error);  // more positions than the step has
  s.record_conv_inputs(*b, row);
  s.length += 1;
  EXPECT_THROW(s.resolve_step(1), Error);  // only 1 of 3 positions written
  EXPECT_TRUE(s.in_step());
  s.record_conv_inputs(*b, row);
  s.record_conv_inputs(*b, row);
  s.length += 2;
  EXPECT_THROW(s.resolve_step(0), Error);
  EXPECT_THROW(s.resolve_step(4), Error);
  EXPECT_GT(s.bytes(), base);
  s.reset();
  EXPECT_FALSE(s.in_step());
  EXPECT_EQ(s.bytes(), base);
  EXPECT_EQ(s.length, 0);
}

}  // namespace
}  // namespace fathom
