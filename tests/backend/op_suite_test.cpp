// Every op of Backend against a plain reference written out here, on fresh
// random inputs, once per backend ("cpu", "cuda"). Inputs are built on the
// host, uploaded, and results downloaded before they are read, so the same
// test holds a device backend to the semantics backend.h documents. A backend
// this build or machine cannot make is skipped by name.
//
// Replay a failure with FATHOM_TEST_SEED=<the seed the failure printed>.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backend/affine_weights.h"
#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/kv_scheme.h"
#include "kv/paged_kv_layer.h"
#include "test_util.h"

namespace fathom {
namespace {

using testing::fresh_rng;
using testing::random_tensor;

// ---------------------------------------------------------------------------
// Host-side helpers: plain loops, doubles where anything is summed.

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// PyTorch's softplus (beta 1, threshold 20).
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// An IEEE half decoded by hand (not core/dtype.h's f16_to_f32, which the CPU
// backend itself uses), so a wrong widening on any backend shows.
float decode_f16(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(double(mant), -24) : std::ldexp(double(1024 + mant), exp - 25);
  return float(sign ? -mag : mag);
}

// A host tensor's values widened to f32 (f32, bf16 and f16).
std::vector<float> widen(const Tensor& host) {
  std::vector<float> out(size_t(host.numel()));
  for (int64_t i = 0; i < host.numel(); ++i) {
    switch (host.dtype()) {
      case DType::f32: out[size_t(i)] = host.data<float>()[i]; break;
      case DType::bf16: out[size_t(i)] = bf16_to_f32(host.data<bf16_t>()[i]); break;
      case DType::f16: out[size_t(i)] = decode_f16(host.data<f16_t>()[i]); break;
      default: ADD_FAILURE() << "widen: " << dtype_name(host.dtype()); break;
    }
  }
  return out;
}

float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// ‖got − ref‖ / ‖ref‖ (norm-wise, so one wrong tail element of a few hundred
// is far above any tolerance here), reporting the worst element by index.
void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double diff = 0.0, norm = 0.0, worst = -1.0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
    if (!(std::fabs(d) <= worst)) worst = std::fabs(d), at = i;  // NaN counts as worst
  }
  const double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  EXPECT_LE(rel, tol) << what << ": relative error " << rel << ", worst element " << at << " got " << got[at]
                      << " want " << ref[at] << " (of " << got.size() << ")";
}

// Bit-for-bit (the op moves or rounds values exactly once).
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": element " << i << " of " << got.size() << " is " << got[i] << ", want " << want[i];
      return;
    }
}

// A random f32 input: its values stay on the host for the reference (the CPU
// backend's upload shares the host storage, so an in-place op changes it) and
// its copy lives on the backend.
struct Input {
  std::vector<float> host;
  Tensor dev;
};

// One attention scenario over a real paged KV layer (OpSuite::check_attention).
struct AttentionCase {
  LayerCodec codec;
  DType plain_dtype;  // the rows' dtype when the codec is plain
  int64_t heads, kv_heads, head_dim;
  std::optional<int64_t> window;
  std::vector<int64_t> steps;  // rows appended, then attended, by each step
  double read_tolerance;       // kv_read against the appended rows (relative) for coded formats
  bool bf16_inputs = false;    // bf16 compute: queries and probabilities may be rounded to bf16
};

// Several sequences attended in one step (Backend::kv_write and attention
// over segments), each with its own layer and length.
struct SegmentsCase {
  std::vector<LayerCodec> codecs;  // one per sequence
  DType plain_dtype;
  int64_t heads, kv_heads, head_dim;
  std::optional<int64_t> window;
  std::vector<int64_t> prompts;             // rows each sequence holds first
  std::vector<std::vector<int64_t>> steps;  // each step's rows, per sequence
};

// ---------------------------------------------------------------------------
// The fixture: one backend per parameter, one fresh seed per test.

class OpSuite : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    try {
      backend_ = make_backend(GetParam());
    } catch (const Error& e) {
      GTEST_SKIP() << "skipped: no " << GetParam() << " backend: " << e.what();
    }
    rng_ = fresh_rng();
  }

  Input input(std::vector<int64_t> shape, float scale = 1.0f) {
    Tensor host = random_tensor(std::move(shape), DType::f32, rng_, scale);
    Input in{widen(host), Tensor()};
    in.dev = backend_->upload(host);
    return in;
  }
  // An uploaded copy of explicit host values.
  Tensor upload(const std::vector<float>& values, std::vector<int64_t> shape) {
    Tensor host = Tensor::empty(std::move(shape), DType::f32);
    EXPECT_EQ(host.numel(), int64_t(values.size()));
    std::copy(values.begin(), values.end(), host.data<float>());
    return backend_->upload(host);
  }
  Tensor out(std::vector<int64_t> shape, DType dtype = DType::f32) { return backend_->empty(std::move(shape), dtype); }
  // A backend tensor's f32 values, through download().
  std::vector<float> read(const Tensor& t) {
    const Tensor h = backend_->download(t);
    EXPECT_EQ(h.dtype(), DType::f32);
    return {h.data<float>(), h.data<float>() + h.numel()};
  }
  std::vector<int32_t> read_i32(const Tensor& t) {
    const Tensor h = backend_->download(t);
    EXPECT_EQ(h.dtype(), DType::i32);
    return {h.data<int32_t>(), h.data<int32_t>() + h.numel()};
  }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  void check_attention(const AttentionCase& c);
  void check_attention_segments(const SegmentsCase& c);
  void check_kv_write_read(const LayerCodec& codec, DType plain_dtype, double tolerance);

  std::shared_ptr<Backend> backend_;
  std::mt19937_64 rng_;
};

// Row counts with tails: one row (decode), a few, more than a vector's worth.
constexpr int64_t kRows[] = {1, 7, 33};

// n token ids of [0, vocab), past two of them both ends and a repeat.
template <class Rng>
std::vector<int32_t> ids_with_ends(int64_t n, int64_t vocab, Rng& rng) {
  std::vector<int32_t> ids = testing::random_ids(n, vocab, rng);
  if (n > 2) ids[0] = 0, ids[1] = int32_t(vocab - 1), ids[2] = ids[n - 1];
  return ids;
}

// ---------------------------------------------------------------------------
// Matmul

// y[M, N] = x·wᵀ (+ bias) in double over w's stored values, x rounded to bf16
// first when asked (products of bf16 values are exact, so only sums differ).
std::vector<double> matmul_reference(std::vector<float> x, const std::vector<float>& w, const std::vector<float>* bias,
                                     int64_t m, int64_t k, int64_t n, bool bf16_inputs) {
  if (bf16_inputs)
    for (float& v : x) v = round_bf16(v);
  std::vector<double> y(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? (*bias)[size_t(j)] : 0.0;
      for (int64_t c = 0; c < k; ++c) acc += double(x[size_t(i * k + c)]) * w[size_t(j * k + c)];
      y[size_t(i * n + j)] = acc;
    }
  return y;
}

TEST_P(OpSuite, Matmul) {
  struct Shape {
    int64_t m, k, n;
  };
  // Odd K and N (vector tails), M = 1 (decode) and a larger prefill-like M;
  // decode-sized M (≤ 16) with K % 8 == 0 over long and short rows (a
  // device's GEMV for one row: its unrolled loop, its tail).
  for (const Shape s : {Shape{1, 64, 48}, Shape{7, 33, 5}, Shape{33, 200, 70}, Shape{1, 1063, 23}, Shape{40, 96, 129},
                        Shape{1, 1344, 37}, Shape{3, 1344, 37}, Shape{12, 1032, 9}, Shape{1, 2056, 17}})
    for (DType wdt : {DType::f32, DType::bf16})
      for (bool with_bias : {false, true})
        for (bool bf16_inputs : {false, true}) {
          const Input x = input({s.m, s.k});
          const Tensor w_host = random_tensor({s.n, s.k}, wdt, rng_, 0.2f);
          const Tensor w = backend_->upload(w_host);
          const Input bias = input({s.n});
          Tensor y = out({s.m, s.n});
          backend_->matmul(x.dev, w, with_bias ? &bias.dev : nullptr, y, bf16_inputs);
          // 5e-6 as tests/backend/matmul_test.cpp: f32 sums over K of exact products.
          expect_close(read(y),
                       matmul_reference(x.host, widen(w_host), with_bias ? &bias.host : nullptr, s.m, s.k, s.n,
                                        bf16_inputs),
                       5e-6,
                       "matmul m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) + " n=" +
                           std::to_string(s.n) + " w=" + dtype_name(wdt) + " bias=" + std::to_string(with_bias) +
                           " bf16_inputs=" + std::to_string(bf16_inputs));
        }
}

TEST_P(OpSuite, MatmulShared) {
  const int64_t k = 72;
  for (int64_t m : kRows)
    for (int targets : {2, 3})
      for (bool bf16_inputs : {false, true}) {
        const Input x = input({m, k});
        // q/k/v-like outputs of different widths, mixed weight dtypes, one with a bias.
        const int64_t widths[] = {48, 17, 33};
        const DType dtypes[] = {DType::bf16, DType::f32, DType::bf16};
        std::vector<Tensor> w_host, w, y;
        std::vector<Input> bias;
        for (int i = 0; i < targets; ++i) {
          w_host.push_back(random_tensor({widths[i], k}, dtypes[i], rng_, 0.2f));
          w.push_back(backend_->upload(w_host.back()));
          bias.push_back(input({widths[i]}));
          y.push_back(out({m, widths[i]}));
        }
        std::vector<Backend::MatmulTarget> list;
        for (int i = 0; i < targets; ++i) list.push_back({&w[size_t(i)], i == 1 ? &bias[1].dev : nullptr, &y[size_t(i)]});
        backend_->matmul_shared(x.dev, list, bf16_inputs);
        for (int i = 0; i < targets; ++i)
          expect_close(read(y[size_t(i)]),
                       matmul_reference(x.host, widen(w_host[size_t(i)]), i == 1 ? &bias[1].host : nullptr, m, k,
                                        widths[i], bf16_inputs),
                       5e-6,
                       "matmul_shared target " + std::to_string(i) + " of " + std::to_string(targets) +
                           " m=" + std::to_string(m) + " bf16_inputs=" + std::to_string(bf16_inputs));
      }
}

TEST_P(OpSuite, MatmulSharedBf16Outputs) {
  // Every output bf16 and K % 8 == 0: a device's decode GEMV takes them
  // together for one row (five outputs: more than one launch holds); rows
  // from 1 to 16.
  const int64_t k = 264;
  const int64_t widths[] = {48, 17, 33, 8, 70};
  for (int64_t m : {1, 2, 3, 9, 16})
    for (bool bf16_inputs : {false, true}) {
      const Input x = input({m, k});
      std::vector<Tensor> w_host, w, y;
      std::vector<Input> bias;
      for (int64_t n : widths) {
        w_host.push_back(random_tensor({n, k}, DType::bf16, rng_, 0.2f));
        w.push_back(backend_->upload(w_host.back()));
        bias.push_back(input({n}));
        y.push_back(out({m, n}));
      }
      std::vector<Backend::MatmulTarget> list;
      for (size_t i = 0; i < w.size(); ++i) list.push_back({&w[i], i % 2 ? &bias[i].dev : nullptr, &y[i]});
      backend_->matmul_shared(x.dev, list, bf16_inputs);
      for (size_t i = 0; i < w.size(); ++i)
        expect_close(read(y[i]),
                     matmul_reference(x.host, widen(w_host[i]), i % 2 ? &bias[i].host : nullptr, m, k, widths[i],
                                      bf16_inputs),
                     5e-6,
                     "matmul_shared bf16 output " + std::to_string(i) + " m=" + std::to_string(m) +
                         " bf16_inputs=" + std::to_string(bf16_inputs));
    }
}

// A random [n, k] matrix quantized as MLX does, and its values (scale·q + bias in f32).
struct AffineCase {
  Tensor host;
  std::vector<float> values;
};

TEST_P(OpSuite, MatmulAffineWeights) {
  // Rows of 12 units of 32 values (fewer than a warp's lanes) and, for
  // decode rows, of 288 (more slices of 1,024 than a device's block has
  // warps); widths with tails for a device's columns per block; rows from
  // decode (a device's packed GEMV: 1-4 rows, 1-16 for 4- and 8-bit codes in
  // bf16 compute, whose kernels take up to 2, 8 and 16: 9 and 16 fill its
  // second tile of x in part and whole) to prefill (widened panels). Three targets of one x: two of one code
  // width (one launch) and one of the next.
  const int kBits[] = {2, 3, 4, 5, 6, 8};
  const DType kParams[] = {DType::bf16, DType::f16, DType::f32};
  int variant = 0;
  for (int64_t k : {384, 9216})
    for (int b = 0; b < 6; ++b)
      for (int group : {32, 64, 128})
        for (int64_t m : {1, 2, 3, 4, 5, 9, 16, 21})
          for (bool bf16_inputs : {false, true}) {
            if (k > 384 && (group != 64 || (m > 4 && m != 16) || m == 2 || m == 3)) continue;
            const DType params = kParams[variant++ % 3];
            const Input x = input({m, k});
            const int64_t widths[] = {37, 8, 70};
            const int bits[] = {kBits[b], kBits[b], kBits[(b + 1) % 6]};
            std::vector<AffineCase> w;
            std::vector<Tensor> w_dev, y;
            std::vector<Input> bias;
            for (int i = 0; i < 3; ++i) {
              AffineCase c;
              c.host = quantize_affine(random_tensor({widths[i], k}, DType::f32, rng_, 0.2f), bits[i], group, params);
              const Tensor values = dequantize_affine(c.host);
              c.values.assign(values.data<float>(), values.data<float>() + values.numel());
              w_dev.push_back(backend_->upload(c.host));
              w.push_back(std::move(c));
              bias.push_back(input({widths[i]}));
              y.push_back(out({m, widths[i]}));
            }
            std::vector<Backend::MatmulTarget> list;
            for (int i = 0; i < 3; ++i) list.push_back({&w_dev[size_t(i)], i != 1 ? &bias[size_t(i)].dev : nullptr, &y[size_t(i)]});
            backend_->matmul_shared(x.dev, list, bf16_inputs);
            for (int i = 0; i < 3; ++i) {
              expect_close(read(y[size_t(i)]),
                           matmul_reference(x.host, w[size_t(i)].values, i != 1 ? &bias[size_t(i)].host : nullptr, m, k,
                                            widths[i], bf16_inputs),
                           5e-6,
                           "target " + std::to_string(i) + ": " + std::to_string(bits[i]) + " bits, group " +
                               std::to_string(group) + ", " + dtype_name(params) + " scales, m=" + std::to_string(m) +
                               ", k=" + std::to_string(k) + ", bf16_inputs=" + std::to_string(bf16_inputs));
            }
          }
}

TEST_P(OpSuite, EmbeddingAffineTable) {
  const int64_t vocab = 50, d = 384;
  int variant = 0;
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128}) {
      const DType params = variant++ % 2 ? DType::bf16 : DType::f16;
      const Tensor host = quantize_affine(random_tensor({vocab, d}, DType::f32, rng_), bits, group, params);
      const Tensor values = dequantize_affine(host);
      const Tensor table = backend_->upload(host);
      for (int64_t n : kRows) {
        const std::vector<int32_t> ids = ids_with_ends(n, vocab, rng_);
        Tensor o = out({n, d});
        backend_->embedding(table, ids, o);
        std::vector<float> want;
        for (int32_t id : ids) want.insert(want.end(), values.data<float>() + id * d, values.data<float>() + (id + 1) * d);
        expect_same(read(o), want, "embedding of " + std::to_string(n) + " ids, " + std::to_string(bits) +
                                       " bits, group " + std::to_string(group));
      }
    }
}

TEST_P(OpSuite, MatmulRejectsBadArguments) {
  const Input x = input({2, 8});
  const Tensor w = input({4, 8}).dev, w_bad_k = input({4, 9}).dev;
  Tensor w_f16_host = Tensor::empty({4, 8}, DType::f16);
  std::memset(w_f16_host.raw(), 0, w_f16_host.nbytes());  // only its dtype matters
  const Tensor w_f16 = backend_->upload(w_f16_host);
  const Tensor bias3 = input({3}).dev;
  Tensor y = out({2, 4}), y_bad = out({2, 5});
  EXPECT_THROW(backend_->matmul(x.dev, w_bad_k, nullptr, y), Error);  // K disagrees
  EXPECT_THROW(backend_->matmul(x.dev, w, nullptr, y_bad), Error);    // y is not [M, N]
  EXPECT_THROW(backend_->matmul(x.dev, w, &bias3, y), Error);         // bias has 3 of N = 4
  EXPECT_THROW(backend_->matmul(x.dev, w_f16, nullptr, y), Error);    // f16 weights
  EXPECT_THROW(backend_->matmul_shared(x.dev, {}), Error);            // no targets
  const Backend::MatmulTarget no_output[] = {{&w, nullptr, nullptr}};
  EXPECT_THROW(backend_->matmul_shared(x.dev, no_output), Error);
  const Backend::MatmulTarget bad_k[] = {{&w, nullptr, &y}, {&w_bad_k, nullptr, &y}};
  EXPECT_THROW(backend_->matmul_shared(x.dev, bad_k), Error);
}

// ---------------------------------------------------------------------------
// Norms

TEST_P(OpSuite, RmsNorm) {
  const float eps = 1e-6f;
  // [rows, D], and [T, heads, head_dim] with a per-head weight (q/k norms);
  // widths that a GPU holds in registers as 1, 2, 4 or 8 float4s a thread
  // and past them (20,000), and widths that are no multiple of 4.
  const std::vector<std::vector<int64_t>> shapes = {{1, 64},   {7, 33},   {33, 200},  {5, 3, 16},
                                                    {1, 4096}, {3, 8192}, {2, 16384}, {1, 20000}};
  for (const auto& shape : shapes) {
    const int64_t d = shape.back();
    const Input x = input(shape, 3.0f), w = input({d});
    Tensor y = out(shape);
    backend_->rms_norm(x.dev, w.dev, eps, y);
    std::vector<double> ref(x.host.size());
    for (size_t r = 0; r < x.host.size() / size_t(d); ++r) {
      double ss = 0.0;
      for (int64_t i = 0; i < d; ++i) ss += double(x.host[r * d + i]) * x.host[r * d + i];
      const double inv = 1.0 / std::sqrt(ss / double(d) + eps);
      for (int64_t i = 0; i < d; ++i) ref[r * d + i] = x.host[r * d + i] * inv * w.host[size_t(i)];
    }
    expect_close(read(y), ref, 1e-5, "rms_norm " + std::to_string(x.host.size() / d) + " rows of " + std::to_string(d));
  }
}

TEST_P(OpSuite, AddRmsNorm) {
  const float eps = 1e-6f;
  for (const auto& shape : std::vector<std::vector<int64_t>>{
           {1, 64}, {7, 33}, {16, 1024}, {1, 4096}, {3, 8192}, {2, 16384}, {1, 20000}, {2, 6}})
    for (bool out_is_y : {false, true}) {
      const int64_t d = shape.back();
      Input x = input(shape, 3.0f), y = input(shape, 3.0f);
      const Input w = input({d});
      Tensor separate = out(shape);
      Tensor& o = out_is_y ? y.dev : separate;
      backend_->add_rms_norm(x.dev, y.dev, w.dev, eps, o);
      std::vector<float> sum(x.host.size());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = x.host[i] + y.host[i];  // one rounding: exact
      std::vector<double> ref(sum.size());
      for (size_t r = 0; r < sum.size() / size_t(d); ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < d; ++i) ss += double(sum[r * d + i]) * sum[r * d + i];
        const double inv = 1.0 / std::sqrt(ss / double(d) + eps);
        for (int64_t i = 0; i < d; ++i) ref[r * d + i] = sum[r * d + i] * inv * w.host[size_t(i)];
      }
      const std::string name = "add_rms_norm " + std::to_string(shape[0]) + "x" + std::to_string(d) +
                               (out_is_y ? " into y" : "");
      expect_same(read(x.dev), sum, name + ": x += y");
      expect_close(read(o), ref, 1e-5, name);
    }
}

TEST_P(OpSuite, GatedRmsNorm) {
  const float eps = 1e-6f;
  for (int64_t rows : kRows)
    for (int64_t d : {32, 45}) {
      Input x = input({rows, d}, 2.0f), z = input({rows, d}, 2.0f), w = input({d});
      backend_->gated_rms_norm(x.dev, z.dev, w.dev, eps);
      std::vector<double> ref(x.host.size());
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < d; ++i) ss += double(x.host[size_t(r * d + i)]) * x.host[size_t(r * d + i)];
        const double inv = 1.0 / std::sqrt(ss / double(d) + eps);
        for (int64_t i = 0; i < d; ++i) {
          const size_t at = size_t(r * d + i);
          ref[at] = w.host[size_t(i)] * (x.host[at] * inv) * silu(z.host[at]);
        }
      }
      expect_close(read(x.dev), ref, 1e-5, "gated_rms_norm rows=" + std::to_string(rows) + " d=" + std::to_string(d));
    }
}

TEST_P(OpSuite, L2NormHeads) {
  // A window of heads in the middle of a wider row (q inside a fused qkv):
  // the columns on either side must come back untouched.
  const int64_t cols = 100, first_col = 21, heads = 3, head_dim = 16;
  const float scale = 0.25f, eps = 1e-6f;
  for (int64_t rows : kRows) {
    Input x = input({rows, cols}, 2.0f);
    backend_->l2_norm_heads(x.dev, first_col, heads, head_dim, scale, eps);
    const std::vector<float> got = read(x.dev);
    std::vector<double> ref = to_double(x.host);
    std::vector<float> outside_got, outside_want, inside_got;
    std::vector<double> inside_ref;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t at = r * cols + first_col + h * head_dim;
        double ss = 0.0;
        for (int64_t i = 0; i < head_dim; ++i) ss += double(x.host[size_t(at + i)]) * x.host[size_t(at + i)];
        for (int64_t i = 0; i < head_dim; ++i) ref[size_t(at + i)] = x.host[size_t(at + i)] * scale / std::sqrt(ss + eps);
      }
      for (int64_t c = 0; c < cols; ++c) {
        const size_t at = size_t(r * cols + c);
        if (c >= first_col && c < first_col + heads * head_dim) {
          inside_got.push_back(got[at]);
          inside_ref.push_back(ref[at]);
        } else {
          outside_got.push_back(got[at]);
          outside_want.push_back(x.host[at]);
        }
      }
    }
    expect_close(inside_got, inside_ref, 1e-5, "l2_norm_heads rows=" + std::to_string(rows));
    expect_same(outside_got, outside_want, "l2_norm_heads: columns outside the heads");
  }
}

TEST_P(OpSuite, NormsRejectBadArguments) {
  const Input x = input({4, 16}), w15 = input({15}), w16 = input({16}), z = input({4, 15});
  Tensor y = out({4, 16});
  EXPECT_THROW(backend_->rms_norm(x.dev, w15.dev, 1e-6f, y), Error);  // weight narrower than a row
  Tensor y_small = out({4, 15});
  EXPECT_THROW(backend_->rms_norm(x.dev, w16.dev, 1e-6f, y_small), Error);
  Tensor xg = x.dev;
  EXPECT_THROW(backend_->gated_rms_norm(xg, z.dev, w16.dev, 1e-6f), Error);  // z's shape differs
  EXPECT_THROW(backend_->gated_rms_norm(xg, x.dev, w15.dev, 1e-6f), Error);
  EXPECT_THROW(backend_->l2_norm_heads(xg, 4, 2, 8, 1.0f, 1e-6f), Error);  // heads run past the row
  EXPECT_THROW(backend_->l2_norm_heads(xg, -1, 1, 8, 1.0f, 1e-6f), Error);
  EXPECT_THROW(backend_->add_rms_norm(xg, x.dev, w15.dev, 1e-6f, y), Error);     // weight narrower than a row
  EXPECT_THROW(backend_->add_rms_norm(xg, z.dev, w16.dev, 1e-6f, y), Error);     // y's size differs
  EXPECT_THROW(backend_->add_rms_norm(xg, x.dev, w16.dev, 1e-6f, y_small), Error);
}

// ---------------------------------------------------------------------------
// RoPE

TEST_P(OpSuite, Rope) {
  const int64_t heads = 3, head_dim = 64;
  // Partial rotary (only the first 2·half features turn) and full rotary.
  for (int64_t half : {int64_t(10), int64_t(16), head_dim / 2})
    for (int64_t t : kRows) {
      Input x = input({t, heads, head_dim});
      std::vector<float> c(size_t(t * half)), s(c.size());
      for (size_t i = 0; i < c.size(); ++i) {
        const float angle = uniform(-10.0f, 10.0f);
        c[i] = std::cos(angle), s[i] = std::sin(angle);
      }
      const Tensor cos = upload(c, {t, half}), sin = upload(s, {t, half});
      backend_->rope(x.dev, cos, sin);
      // HF rotate_half: feature i pairs with i + half.
      const std::vector<float> got = read(x.dev);
      std::vector<float> rotated_got, pass_got, pass_want;
      std::vector<double> rotated_ref;
      for (int64_t ti = 0; ti < t; ++ti)
        for (int64_t h = 0; h < heads; ++h) {
          const size_t base = size_t((ti * heads + h) * head_dim);
          for (int64_t i = 0; i < head_dim; ++i) {
            if (i >= 2 * half) {
              pass_got.push_back(got[base + i]);
              pass_want.push_back(x.host[base + i]);
              continue;
            }
            const int64_t j = i < half ? i : i - half;
            const double cj = c[size_t(ti * half + j)], sj = s[size_t(ti * half + j)];
            const double a = x.host[base + j], b = x.host[base + j + half];
            rotated_ref.push_back(i < half ? a * cj - b * sj : b * cj + a * sj);
            rotated_got.push_back(got[base + i]);
          }
        }
      expect_close(rotated_got, rotated_ref, 1e-5, "rope t=" + std::to_string(t) + " half=" + std::to_string(half));
      expect_same(pass_got, pass_want, "rope: features past the rotary part");
    }
}

TEST_P(OpSuite, RmsNormRope) {
  const float eps = 1e-6f;
  const int64_t heads = 3;
  // Full and partial rotary; head_dim 128 (Qwen3) and an odd-sized tail part.
  for (const auto& [head_dim, half] : {std::pair<int64_t, int64_t>{128, 64}, {40, 12}})
    for (int64_t t : kRows) {
      Input x = input({t, heads, head_dim}, 3.0f);
      const Input w = input({head_dim});
      std::vector<float> c(size_t(t * half)), s(c.size());
      for (size_t i = 0; i < c.size(); ++i) {
        const float angle = uniform(-10.0f, 10.0f);
        c[i] = std::cos(angle), s[i] = std::sin(angle);
      }
      backend_->rms_norm_rope(x.dev, w.dev, eps, upload(c, {t, half}), upload(s, {t, half}));
      std::vector<double> ref(x.host.size());
      for (int64_t row = 0; row < t * heads; ++row) {
        const size_t base = size_t(row * head_dim);
        double ss = 0.0;
        for (int64_t i = 0; i < head_dim; ++i) ss += double(x.host[base + i]) * x.host[base + i];
        const double inv = 1.0 / std::sqrt(ss / double(head_dim) + eps);
        std::vector<double> v(static_cast<size_t>(head_dim));
        for (int64_t i = 0; i < head_dim; ++i) v[size_t(i)] = x.host[base + i] * inv * w.host[size_t(i)];
        const int64_t ti = row / heads;
        for (int64_t i = 0; i < head_dim; ++i) {
          if (i >= 2 * half) {
            ref[base + i] = v[size_t(i)];
            continue;
          }
          const int64_t j = i < half ? i : i - half;
          const double cj = c[size_t(ti * half + j)], sj = s[size_t(ti * half + j)];
          const double a = v[size_t(j)], b = v[size_t(j + half)];
          ref[base + i] = i < half ? a * cj - b * sj : b * cj + a * sj;
        }
      }
      expect_close(read(x.dev), ref, 1e-5,
                   "rms_norm_rope t=" + std::to_string(t) + " head_dim=" + std::to_string(head_dim));
    }
}

TEST_P(OpSuite, RopeRejectsBadArguments) {
  const Input x = input({3, 2, 16});
  Tensor xd = x.dev;
  const Tensor cos = input({3, 8}).dev, sin = input({3, 8}).dev;
  const Tensor cos_rows = input({2, 8}).dev, sin_rows = input({2, 8}).dev;
  const Tensor cos_wide = input({3, 9}).dev, sin_wide = input({3, 9}).dev;
  const Tensor sin_narrow = input({3, 4}).dev;
  EXPECT_THROW(backend_->rope(xd, cos_rows, sin_rows), Error);  // one cos row per token
  EXPECT_THROW(backend_->rope(xd, cos_wide, sin_wide), Error);  // rotary part wider than head_dim
  EXPECT_THROW(backend_->rope(xd, cos, sin_narrow), Error);     // cos and sin disagree
  Tensor flat = input({3, 32}).dev;
  EXPECT_THROW(backend_->rope(flat, cos, sin), Error);  // x must be [T, heads, head_dim]
  const Tensor w16 = input({16}).dev, w8 = input({8}).dev;
  EXPECT_THROW(backend_->rms_norm_rope(xd, w8, 1e-6f, cos, sin), Error);  // one weight per head feature
  EXPECT_THROW(backend_->rms_norm_rope(xd, w16, 1e-6f, cos_rows, sin_rows), Error);
  EXPECT_THROW(backend_->rms_norm_rope(flat, w16, 1e-6f, cos, sin), Error);
  Tensor k = input({3, 1, 16}).dev, k_rows = input({2, 1, 16}).dev, k_wide = input({3, 1, 18}).dev;
  // rope_kv_write: q xd, k of 1 kv head, into a view of 4 rows of it; the
  // segment's rows must cover k's, and q and k agree on rows and head size.
  auto pool = std::make_shared<KvBlockPool>(4096, backend_);
  PagedKvLayer layer(pool, LayerCodec{}.format(1, 16, DType::f32, pool->block_bytes()), 4, std::nullopt, 4, 1);
  const Tensor v = input({3, 1, 16}).dev;
  layer.append(input({4, 1, 16}).dev, input({4, 1, 16}).dev);
  const KvView view = layer.view();
  const KvSegment whole{view, 0, 3, view.first_position}, short_segment{view, 0, 2, view.first_position};
  const auto rope_kv_write = [&](const KvSegment& s, Tensor& q, Tensor& keys, const Backend::QkNorms& norms) {
    backend_->rope_kv_write(std::span(&s, 1), q, keys, v, norms, cos, sin);
  };
  EXPECT_NO_THROW(rope_kv_write(whole, xd, k, {}));
  EXPECT_NO_THROW(rope_kv_write(whole, xd, k, {&w16, &w16, 1e-6f}));
  EXPECT_THROW(rope_kv_write(short_segment, xd, k, {}), Error);
  EXPECT_THROW(rope_kv_write(whole, xd, k, {&w16, nullptr, 1e-6f}), Error);  // a norm for q alone
  EXPECT_THROW(rope_kv_write(whole, xd, k, {&w16, &w8, 1e-6f}), Error);      // k's weight too narrow
  EXPECT_THROW(rope_kv_write(whole, xd, k_rows, {}), Error);                 // k's rows differ from q's
  EXPECT_THROW(rope_kv_write(whole, xd, k_wide, {}), Error);                 // so does its head size
  EXPECT_THROW(rope_kv_write(whole, xd, xd, {}), Error);                     // q and k one tensor
}

// ---------------------------------------------------------------------------
// Elementwise

// The shapes elementwise ops run on: tails, and one past the CPU's
// inline-vs-threaded split (32768 elements).
const std::vector<std::vector<int64_t>> kElementwiseShapes = {{1, 50}, {7, 33}, {33, 1100}};

std::string shape_name(const std::vector<int64_t>& s) {
  std::string out;
  for (int64_t d : s) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

TEST_P(OpSuite, SiluMul) {
  for (const auto& shape : kElementwiseShapes) {
    const Input gate = input(shape, 3.0f), up = input(shape);
    Tensor o = out(shape);
    backend_->silu_mul(gate.dev, up.dev, o);
    std::vector<double> ref(gate.host.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = silu(gate.host[i]) * up.host[i];
    expect_close(read(o), ref, 1e-5, "silu_mul " + shape_name(shape));
  }
}

TEST_P(OpSuite, GeluTanhMul) {
  for (const auto& shape : kElementwiseShapes) {
    const Input gate = input(shape, 3.0f), up = input(shape);
    Tensor o = out(shape);
    backend_->gelu_tanh_mul(gate.dev, up.dev, o);
    std::vector<double> ref(gate.host.size());
    const double k = std::sqrt(2.0 / M_PI);
    for (size_t i = 0; i < ref.size(); ++i) {
      const double x = gate.host[i];
      ref[i] = 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))) * up.host[i];
    }
    expect_close(read(o), ref, 1e-5, "gelu_tanh_mul " + shape_name(shape));
  }
}

TEST_P(OpSuite, AddInplace) {
  for (const auto& shape : kElementwiseShapes) {
    Input x = input(shape), y = input(shape);
    backend_->add_inplace(x.dev, y.dev);
    std::vector<float> want(x.host.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = x.host[i] + y.host[i];  // one rounding: exact
    expect_same(read(x.dev), want, "add_inplace " + shape_name(shape));
  }
}

TEST_P(OpSuite, Scale) {
  for (const auto& shape : kElementwiseShapes) {
    Input x = input(shape);
    const float s = uniform(-3.0f, 3.0f);
    backend_->scale(x.dev, s);
    std::vector<float> want(x.host.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = x.host[i] * s;
    expect_same(read(x.dev), want, "scale " + shape_name(shape));
  }
}

TEST_P(OpSuite, SoftCap) {
  for (const auto& shape : kElementwiseShapes) {
    // Logits well past the cap, so the tanh saturates for some of them.
    Input x = input(shape, 40.0f);
    const float cap = 30.0f;
    backend_->soft_cap(x.dev, cap);
    std::vector<double> ref(x.host.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::tanh(double(x.host[i]) / cap) * cap;
    expect_close(read(x.dev), ref, 1e-5, "soft_cap " + shape_name(shape));
  }
}

TEST_P(OpSuite, MulColumns) {
  // [rows, D] and [T, heads, D] (w has the last dimension).
  const std::vector<std::vector<int64_t>> shapes = {{1, 50}, {7, 33}, {33, 1100}, {5, 3, 24}};
  for (const auto& shape : shapes) {
    const int64_t d = shape.back();
    Input x = input(shape), w = input({d});
    backend_->mul_columns(x.dev, w.dev);
    std::vector<float> want(x.host.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = x.host[i] * w.host[i % size_t(d)];
    expect_same(read(x.dev), want, "mul_columns " + shape_name(shape));
  }
}

TEST_P(OpSuite, SigmoidMul) {
  for (const auto& shape : kElementwiseShapes)
    for (bool per_row : {false, true}) {
      const int64_t rows = shape[0], d = shape[1];
      Input x = input(shape);
      const Input gate = per_row ? input({rows, 1}, 3.0f) : input(shape, 3.0f);
      backend_->sigmoid_mul(x.dev, gate.dev);
      std::vector<double> ref(x.host.size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = x.host[i] * sigmoid(gate.host[per_row ? i / size_t(d) : i]);
      expect_close(read(x.dev), ref, 1e-5,
                   "sigmoid_mul " + shape_name(shape) + (per_row ? " per-row gate" : " full gate"));
    }
}

TEST_P(OpSuite, ElementwiseRejectsBadArguments) {
  const Input a = input({4, 8}), b = input({4, 9}), w = input({7}), g = input({3, 1});
  Tensor o = out({4, 8}), o_small = out({4, 7});
  Tensor ad = a.dev;
  EXPECT_THROW(backend_->silu_mul(a.dev, b.dev, o), Error);        // gate and up differ
  EXPECT_THROW(backend_->silu_mul(a.dev, a.dev, o_small), Error);  // out too small
  EXPECT_THROW(backend_->gelu_tanh_mul(a.dev, b.dev, o), Error);
  EXPECT_THROW(backend_->gelu_tanh_mul(a.dev, a.dev, o_small), Error);
  EXPECT_THROW(backend_->add_inplace(ad, b.dev), Error);
  EXPECT_THROW(backend_->mul_columns(ad, w.dev), Error);  // 7 scales for 8 columns
  EXPECT_THROW(backend_->sigmoid_mul(ad, g.dev), Error);  // 3 gates for 4 rows
  EXPECT_THROW(backend_->soft_cap(ad, 0.0f), Error);      // the cap must be positive
  Tensor half = backend_->upload(random_tensor({4, 8}, DType::bf16, rng_));
  EXPECT_THROW(backend_->scale(half, 2.0f), Error);  // f32 only
  EXPECT_THROW(backend_->soft_cap(half, 2.0f), Error);
}

// ---------------------------------------------------------------------------
// Memory and row movement

TEST_P(OpSuite, Fill) {
  for (const auto& shape : kElementwiseShapes) {
    Input x = input(shape);
    const float value = uniform(-5.0f, 5.0f);
    backend_->fill(x.dev, value);
    expect_same(read(x.dev), std::vector<float>(x.host.size(), value), "fill " + shape_name(shape));
  }
  // A row slice of a backend tensor: only its rows change.
  const Input x = input({9, 13});
  Tensor middle = x.dev.slice_rows(3, 7);
  backend_->fill(middle, 0.5f);
  std::vector<float> want = x.host;
  std::fill(want.begin() + 3 * 13, want.begin() + 7 * 13, 0.5f);
  expect_same(read(x.dev), want, "fill of rows [3, 7)");
}

TEST_P(OpSuite, Copy) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (int64_t rows : kRows) {
      const Tensor host = random_tensor({rows, 37}, dtype, rng_);
      const Tensor src = backend_->upload(host);
      // Same element count, another shape: copy moves elements, not shapes.
      Tensor dst = out({37, rows}, dtype);
      backend_->copy(src, dst);
      const Tensor back = backend_->download(dst);
      EXPECT_EQ(0, std::memcmp(back.raw(), host.raw(), host.nbytes()))
          << "copy of " << rows << "x37 " << dtype_name(dtype);
    }
  // Into the middle rows of a larger tensor, through a slice.
  const Input big = input({10, 8}), part = input({3, 8});
  Tensor rows = big.dev.slice_rows(4, 7);
  backend_->copy(part.dev, rows);
  std::vector<float> want = big.host;
  std::copy(part.host.begin(), part.host.end(), want.begin() + 4 * 8);
  expect_same(read(big.dev), want, "copy into rows [4, 7)");
}

TEST_P(OpSuite, Embedding) {
  const int64_t vocab = 50, d = 37;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    Tensor table_host;
    if (dtype == DType::f16) {
      // Any finite half, subnormals included (random_tensor has no f16 path).
      table_host = Tensor::empty({vocab, d}, DType::f16);
      for (int64_t i = 0; i < table_host.numel(); ++i) {
        uint16_t bits;
        do bits = uint16_t(rng_()); while (((bits >> 10) & 0x1f) == 0x1f);
        table_host.data<f16_t>()[i] = bits;
      }
    } else {
      table_host = random_tensor({vocab, d}, dtype, rng_);
    }
    const Tensor table = backend_->upload(table_host);
    const std::vector<float> rows = widen(table_host);
    for (int64_t n : kRows) {
      const std::vector<int32_t> ids = ids_with_ends(n, vocab, rng_);
      Tensor o = out({n, d});
      backend_->embedding(table, ids, o);
      std::vector<float> want;
      for (int32_t id : ids) want.insert(want.end(), rows.begin() + id * d, rows.begin() + (id + 1) * d);
      expect_same(read(o), want, std::string("embedding ") + dtype_name(dtype) + " of " + std::to_string(n) + " ids");
    }
  }
}

TEST_P(OpSuite, CopyColumns) {
  for (int64_t rows : kRows)
    for (const auto& [src_col, dst_col, width] : {std::tuple{5, 17, 13}, std::tuple{0, 0, 40}, std::tuple{39, 49, 1}}) {
      Input src = input({rows, 40}), dst = input({rows, 50});
      backend_->copy_columns(src.dev, src_col, dst.dev, dst_col, width);
      std::vector<float> want = dst.host;  // columns outside the window keep their values
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < width; ++i) want[size_t(r * 50 + dst_col + i)] = src.host[size_t(r * 40 + src_col + i)];
      expect_same(read(dst.dev), want,
                  "copy_columns rows=" + std::to_string(rows) + " " + std::to_string(width) + " from " +
                      std::to_string(src_col) + " to " + std::to_string(dst_col));
    }
}

TEST_P(OpSuite, GatherRows) {
  const int64_t n = 20;
  for (int64_t d : {1, 33, 256}) {
    const Input src = input({n, d});
    std::vector<int32_t> rows = testing::random_ids(9, n, rng_);
    rows[0] = int32_t(n - 1), rows[1] = 0, rows[2] = rows[5];  // both ends and a repeat
    Tensor dst = out({int64_t(rows.size()), d});
    backend_->gather_rows(src.dev, rows, dst);
    std::vector<float> want;
    for (int32_t r : rows) want.insert(want.end(), src.host.begin() + r * d, src.host.begin() + (r + 1) * d);
    expect_same(read(dst), want, "gather_rows d=" + std::to_string(d));
  }
}

TEST_P(OpSuite, ScatterAddRows) {
  for (int64_t d : {1, 33, 256}) {
    const int64_t dst_rows = 6, n = 11;
    Input dst = input({dst_rows, d});
    const Input src = input({n, d});
    // Repeated destinations (several experts' outputs into one token's row).
    std::vector<int32_t> rows = testing::random_ids(n, dst_rows, rng_);
    rows[0] = rows[3] = rows[7] = 2;
    std::vector<float> weights(static_cast<size_t>(n));
    for (float& w : weights) w = uniform(-1.0f, 2.0f);
    backend_->scatter_add_rows(src.dev, rows, weights, dst.dev);
    std::vector<double> ref = to_double(dst.host);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) ref[size_t(rows[size_t(i)] * d + c)] += double(weights[size_t(i)]) * src.host[size_t(i * d + c)];
    expect_close(read(dst.dev), ref, 1e-5, "scatter_add_rows d=" + std::to_string(d));
  }
}

TEST_P(OpSuite, RowMovementRejectsBadArguments) {
  const Input a = input({4, 8}), b = input({4, 9}), c = input({3, 8});
  Tensor ad = a.dev, bd = b.dev;
  Tensor a_bf16 = backend_->upload(random_tensor({4, 8}, DType::bf16, rng_));
  Tensor ints = out({4, 8}, DType::i32);
  EXPECT_THROW(backend_->copy(a.dev, bd), Error);      // element counts differ
  EXPECT_THROW(backend_->copy(a.dev, a_bf16), Error);  // dtypes differ
  EXPECT_THROW(backend_->fill(ints, 1.0f), Error);     // f32 only
  EXPECT_THROW(backend_->copy_columns(a.dev, 4, bd, 0, 5), Error);  // past src's columns
  EXPECT_THROW(backend_->copy_columns(a.dev, 0, bd, 5, 5), Error);  // past dst's columns
  Tensor cd = c.dev;
  EXPECT_THROW(backend_->copy_columns(a.dev, 0, cd, 0, 2), Error);  // row counts differ
  Tensor g = out({2, 8});
  EXPECT_THROW(backend_->gather_rows(a.dev, {0, 4}, g), Error);  // row 4 of 4
  EXPECT_THROW(backend_->gather_rows(a.dev, {0}, g), Error);     // 1 row into 2
  EXPECT_THROW(backend_->scatter_add_rows(c.dev, {0, 1, 2}, {1.0f, 1.0f}, ad), Error);  // 2 weights for 3 rows
  EXPECT_THROW(backend_->scatter_add_rows(c.dev, {0, 1, 4}, {1.0f, 1.0f, 1.0f}, ad), Error);  // row 4 of 4
  EXPECT_THROW(backend_->scatter_add_rows(c.dev, {0, 1, -1}, {1.0f, 1.0f, 1.0f}, ad), Error);
  Tensor e = out({2, 8});
  EXPECT_THROW(backend_->embedding(a.dev, {0, 4}, e), Error);   // id 4 of vocab 4
  EXPECT_THROW(backend_->embedding(a.dev, {0, -1}, e), Error);  // negative id
  EXPECT_THROW(backend_->embedding(a.dev, {0}, e), Error);      // 1 id for 2 rows
}

// ---------------------------------------------------------------------------
// Picks: greedy, and drawn by a rule

// The first index of the largest non-NaN value; a row with nothing above
// -inf: its first -inf; a row of NaNs: 0.
int32_t first_largest(const float* x, int64_t n) {
  int32_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = int32_t(i);
  return std::max(best, 0);
}

TEST_P(OpSuite, PickRowsGreedily) {
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  // One span, a span and one more, many spans, and more spans than a row may
  // take (they widen).
  for (const int64_t n : {1, 7, 4096, 4097, 70001, 300000}) {
    const int64_t rows = 9;
    std::vector<float> x(size_t(rows * n));
    for (float& v : x) v = uniform(-8.0f, 8.0f);
    std::uniform_int_distribution<int64_t> at(0, n - 1);
    float* r = x.data();
    // Row 1: its largest value three times, the first in a random place.
    const int64_t tie = at(rng_);
    for (const int64_t i : {tie, std::min(n - 1, tie + 4096), n - 1}) r[n + i] = 9.5f;
    // Row 2: NaNs, one of them where the largest value would be.
    *std::max_element(r + 2 * n, r + 3 * n) = kNan;
    for (int k = 0; k < 5; ++k) r[2 * n + at(rng_)] = kNan;
    // Row 3: +inf twice. Row 4: every value -inf. Row 5: -inf and NaN.
    // Row 6: NaN only. Row 7: all one value.
    r[3 * n + at(rng_)] = kInf, r[3 * n + at(rng_)] = kInf;
    std::fill(r + 4 * n, r + 5 * n, -kInf);
    for (int64_t i = 0; i < n; ++i) r[5 * n + i] = i % 3 == 0 ? kNan : -kInf;
    std::fill(r + 6 * n, r + 7 * n, kNan);
    std::fill(r + 7 * n, r + 8 * n, 0.25f);
    const Tensor dev = upload(x, {rows, n});
    Tensor ids = out({rows}, DType::i32);
    const std::vector<PickRule> greedy(static_cast<size_t>(rows));
    backend_->pick_rows(dev, greedy, ids);
    const std::vector<int32_t> got = read_i32(ids);
    for (int64_t row = 0; row < rows; ++row)
      EXPECT_EQ(got[size_t(row)], first_largest(x.data() + row * n, n)) << "pick_rows n=" << n << " row " << row;
  }
}

// Rows drawn from by a temperature, a min-p and a uniform pick what the host
// sampler's draw picks from them (cpu::pick_token), beside greedy rows.
TEST_P(OpSuite, PickRowsDrawsAsTheHostSamplerDoes) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (const int64_t n : {1, 7, 4097, 70001, 151936}) {
    const int64_t rows = 18;
    std::vector<float> x(size_t(rows * n));
    std::normal_distribution<float> logit(0.0f, 3.0f);
    for (float& v : x) v = logit(rng_);
    std::uniform_int_distribution<int64_t> at(0, n - 1);
    float* r = x.data();
    for (int k = 0; k < 20; ++k) r[at(rng_)] = -kInf, r[at(rng_)] = NAN;  // row 0: masked ids, NaNs
    r[n + at(rng_)] = kInf;                            // row 1: an infinite best takes all
    std::fill(r + 2 * n, r + 3 * n, -kInf);            // row 2: nothing above -inf
    std::fill(r + 3 * n, r + 4 * n, 0.5f);             // row 3: all one value
    for (int k = 0; k < 20; ++k) r[14 * n + at(rng_)] = -kInf, r[14 * n + at(rng_)] = NAN;  // row 14: masked, NaNs
    for (int64_t i = 15 * n; i < 16 * n; ++i) r[i] = std::round(r[i]);  // row 15: many ties
    std::vector<PickRule> rules(static_cast<size_t>(rows));
    for (int64_t row = 0; row < rows; ++row) {
      const double temperature = row == 4 ? 1e-3 : row == 5 || row == 13 ? 50.0 : 0.2 + 2.0 * u(rng_);
      const float min_p = row % 3 == 0 ? 0.0f : row % 3 == 1 ? 0.05f : float(u(rng_));
      if (row != 11) rules[size_t(row)] = {float(temperature), min_p, row == 6 ? 0.0 : row == 7 ? 0.9999999999 : u(rng_)};
    }
    // Ranked draws (top-k, top-p): ties among equal values ranked by id
    // (rows 3 and 15), masked ids and NaNs below every candidate (14).
    rules[1].top_p = 0.5f;
    rules[2].top_k = 2;
    rules[3].top_k = 3;
    rules[8].top_k = 40;
    rules[9].top_p = 0.9f;
    rules[10].top_k = 5, rules[10].top_p = 0.5f;
    rules[12].top_k = n / 2 + 1, rules[12].top_p = 0.95f;
    rules[13].top_p = 0.99f;
    rules[14].top_k = 20, rules[14].top_p = 0.7f;
    rules[15].top_k = 100, rules[15].top_p = 0.8f;
    rules[16].top_k = n;  // as many as the row: not ranked
    rules[17].top_k = 1;
    const Tensor dev = upload(x, {rows, n});
    Tensor ids = out({rows}, DType::i32);
    backend_->pick_rows(dev, rules, ids);
    const std::vector<int32_t> got = read_i32(ids);
    for (int64_t row = 0; row < rows; ++row) {
      const PickRule& rule = rules[size_t(row)];
      EXPECT_EQ(got[size_t(row)], cpu::pick_token({x.data() + row * n, size_t(n)}, rule))
          << "pick_rows n=" << n << " row " << row << " (temperature " << rule.temperature << ", min_p " << rule.min_p
          << ", uniform " << rule.uniform << ", top_k " << rule.top_k << ", top_p " << rule.top_p << ")";
    }
  }
}

TEST_P(OpSuite, PickRowsRejectsBadArguments) {
  const Tensor x = input({3, 8}).dev, flat = input({8}).dev;
  Tensor ids = out({3}, DType::i32), ids_f32 = out({3}), ids_short = out({2}, DType::i32);
  const std::vector<PickRule> greedy(3);
  EXPECT_THROW(backend_->pick_rows(flat, greedy, ids), Error);       // x must be [rows, vocab]
  EXPECT_THROW(backend_->pick_rows(x, greedy, ids_f32), Error);      // ids must be i32
  EXPECT_THROW(backend_->pick_rows(x, greedy, ids_short), Error);    // one id per row
  const Tensor empty_rows = input({3, 0}).dev;
  EXPECT_THROW(backend_->pick_rows(empty_rows, greedy, ids), Error);  // nothing to pick
  EXPECT_THROW(backend_->pick_rows(x, std::vector<PickRule>(2), ids), Error);  // one rule per row
  for (const PickRule bad : {PickRule{-1.0f, 0.0f, 0.5}, PickRule{NAN, 0.0f, 0.5}, PickRule{1.0f, 1.5f, 0.5},
                             PickRule{1.0f, 0.0f, 1.0}, PickRule{1.0f, 0.0f, -0.25}, PickRule{1.0f, 0.0f, 0.5, -1},
                             PickRule{1.0f, 0.0f, 0.5, 0, 0.0f}, PickRule{1.0f, 0.0f, 0.5, 0, 1.5f}}) {
    std::vector<PickRule> rules(3);
    rules[1] = bad;
    EXPECT_THROW(backend_->pick_rows(x, rules, ids), Error)
        << "temperature " << bad.temperature << ", min_p " << bad.min_p << ", uniform " << bad.uniform;
  }
}

// ---------------------------------------------------------------------------
// Mixture-of-experts routing

TEST_P(OpSuite, RouteTopK) {
  for (const auto& [t, e, k] : {std::tuple{1, 8, 2}, std::tuple{7, 33, 4}, std::tuple{33, 64, 8}, std::tuple{5, 6, 6},
                               std::tuple{3, 16, 1}})
    for (bool renormalize : {false, true})
      for (bool scaled : {false, true}) {
        // Distinct logits (gaps of at least 0.01) in random order: a
        // near-tie is not decided by rounding.
        std::vector<float> logits;
        for (int64_t row = 0; row < t; ++row) {
          std::vector<float> v(static_cast<size_t>(e));
          float acc = uniform(-4.0f, 0.0f);
          for (float& x : v) x = acc += uniform(0.01f, 0.6f);
          std::shuffle(v.begin(), v.end(), rng_);
          logits.insert(logits.end(), v.begin(), v.end());
        }
        std::vector<float> scale(static_cast<size_t>(e));
        for (float& s : scale) s = uniform(0.5f, 2.0f);
        const Tensor logits_dev = upload(logits, {t, e}), scale_dev = upload(scale, {e});
        Tensor ids = out({t, k}, DType::i32), weights = out({t, k});
        backend_->route_top_k(logits_dev, k, renormalize, scaled ? &scale_dev : nullptr, ids, weights);
        const std::vector<int32_t> got_ids = read_i32(ids);
        const std::vector<float> got_w = read(weights);
        const std::string what = "route_top_k t=" + std::to_string(t) + " e=" + std::to_string(e) +
                                 " k=" + std::to_string(k) + " renormalize=" + std::to_string(renormalize) +
                                 " scaled=" + std::to_string(scaled);
        for (int64_t row = 0; row < t; ++row) {
          const float* l = logits.data() + row * e;
          const double mx = *std::max_element(l, l + e);
          std::vector<double> p(static_cast<size_t>(e));
          double sum = 0.0;
          for (int64_t i = 0; i < e; ++i) sum += p[size_t(i)] = std::exp(l[i] - mx);
          for (double& x : p) x /= sum;
          std::vector<int32_t> order(static_cast<size_t>(e));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
          double chosen = 0.0;
          for (int64_t j = 0; j < k; ++j) chosen += p[size_t(order[size_t(j)])];
          for (int64_t j = 0; j < k; ++j) {
            const int32_t id = order[size_t(j)];
            ASSERT_EQ(got_ids[size_t(row * k + j)], id) << what << " row " << row << " rank " << j;
            double w = p[size_t(id)];
            if (renormalize) w /= chosen;
            if (scaled) w *= scale[size_t(id)];
            EXPECT_NEAR(got_w[size_t(row * k + j)], w, 1e-6) << what << " row " << row << " rank " << j;
          }
        }
      }
}

TEST_P(OpSuite, RouteTopKRejectsBadArguments) {
  const Tensor logits = input({3, 8}).dev, scale7 = input({7}).dev;
  Tensor ids = out({3, 2}, DType::i32), weights = out({3, 2});
  Tensor ids_f32 = out({3, 2}), weights_wide = out({3, 3}), ids_9 = out({3, 9}, DType::i32), w_9 = out({3, 9});
  Tensor ids_0 = out({3, 0}, DType::i32), w_0 = out({3, 0});
  EXPECT_THROW(backend_->route_top_k(logits, 9, true, nullptr, ids_9, w_9), Error);  // k > experts
  EXPECT_THROW(backend_->route_top_k(logits, 0, true, nullptr, ids_0, w_0), Error);  // k = 0
  EXPECT_THROW(backend_->route_top_k(logits, 2, true, nullptr, ids_f32, weights), Error);  // ids must be i32
  EXPECT_THROW(backend_->route_top_k(logits, 2, true, nullptr, ids, weights_wide), Error);
  EXPECT_THROW(backend_->route_top_k(logits, 2, true, &scale7, ids, weights), Error);  // 7 scales for 8 experts
}

// y = Σ over each row's choices of weight · down(act(gate·x) · up·x), in
// double; in bf16 compute each matmul's input is rounded to bf16 first.
std::vector<double> expert_mlps_reference(const std::vector<float>& x, const std::vector<std::vector<float>>& gate,
                                          const std::vector<std::vector<float>>& up,
                                          const std::vector<std::vector<float>>& down, const std::vector<int32_t>& ids,
                                          const std::vector<float>& weights, int64_t t, int64_t k, int64_t hidden,
                                          int64_t inter, GateActivation act, bool bf16_inputs) {
  auto in = [&](float v) { return double(bf16_inputs ? round_bf16(v) : v); };
  std::vector<double> y(size_t(t * hidden), 0.0);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const size_t e = size_t(ids[size_t(r * k + j)]);
      std::vector<float> h(static_cast<size_t>(inter));
      for (int64_t n = 0; n < inter; ++n) {
        double g = 0.0, u = 0.0;
        for (int64_t c = 0; c < hidden; ++c) {
          g += in(x[size_t(r * hidden + c)]) * gate[e][size_t(n * hidden + c)];
          u += in(x[size_t(r * hidden + c)]) * up[e][size_t(n * hidden + c)];
        }
        const double a = act == GateActivation::silu
                             ? silu(g)
                             : 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
        h[size_t(n)] = float(a * u);
      }
      for (int64_t c = 0; c < hidden; ++c) {
        double o = 0.0;
        for (int64_t n = 0; n < inter; ++n) o += in(h[size_t(n)]) * down[e][size_t(c * inter + n)];
        y[size_t(r * hidden + c)] += double(weights[size_t(r * k + j)]) * o;
      }
    }
  return y;
}

TEST_P(OpSuite, ExpertMlps) {
  struct Case {
    int64_t t, experts, k, hidden, inter;
  };
  // Decode rows, a batch past 16 rows, one past 64 (the host's routing on a
  // device), and widths the device kernels do not take (hidden 36, 3-bit codes).
  // Weights plain (f32, bf16) or MLX-coded (bits, group; scales and biases
  // of a dtype that varies from case to case).
  struct Format {
    DType dtype;
    int bits = 0, group = 0;
  };
  const DType kParams[] = {DType::bf16, DType::f16, DType::f32};
  int variant = 0;
  for (const Case& c : {Case{1, 6, 2, 64, 32}, Case{7, 33, 8, 64, 96}, Case{40, 12, 4, 128, 64},
                        Case{70, 9, 3, 64, 32}, Case{5, 6, 2, 36, 20}})
    for (Format fmt : {Format{DType::f32}, Format{DType::bf16}, Format{DType::affine, 4, 32},
                       Format{DType::affine, 8, 64}, Format{DType::affine, 4, 64}, Format{DType::affine, 3, 32}})
      for (bool bf16_inputs : {false, true})
        for (bool bound : {true, false}) {
          if (fmt.dtype == DType::f32 && bf16_inputs) continue;  // bf16 compute has bf16 weights
          if (fmt.dtype == DType::affine && (c.hidden % fmt.group || c.inter % fmt.group)) continue;
          const GateActivation act = c.t % 2 ? GateActivation::silu : GateActivation::gelu_tanh;
          const DType params = kParams[variant++ % 3];
          ExpertBank bank;
          bank.act = act;
          std::vector<std::vector<float>> gate, up, down;
          // Experts no row picks hold NaN: reading one would poison the output.
          const int64_t unused = c.experts - 1;
          for (int64_t e = 0; e < c.experts; ++e) {
            for (auto [list, dst, rows, cols] :
                 {std::tuple{&gate, &bank.gate, c.inter, c.hidden}, std::tuple{&up, &bank.up, c.inter, c.hidden},
                  std::tuple{&down, &bank.down, c.hidden, c.inter}}) {
              Tensor host = random_tensor({rows, cols}, fmt.dtype == DType::affine ? DType::f32 : fmt.dtype, rng_, 0.4f);
              if (fmt.dtype == DType::affine) {
                host = quantize_affine(host, fmt.bits, fmt.group, params);
                const Tensor values = dequantize_affine(host);
                list->push_back(std::vector<float>(values.data<float>(), values.data<float>() + values.numel()));
                if (e == unused) {
                  const Tensor& scales = host.affine_quant().scales;
                  for (int64_t i = 0; i < scales.numel(); ++i)
                    params == DType::f32 ? void(scales.data<float>()[i] = NAN)
                                         : void(scales.data<uint16_t>()[i] = params == DType::bf16 ? 0x7fc0 : 0x7e00);
                }
              } else {
                if (e == unused)
                  for (int64_t i = 0; i < host.numel(); ++i)
                    fmt.dtype == DType::f32 ? void(host.data<float>()[i] = NAN) : void(host.data<bf16_t>()[i] = 0x7fc0);
                list->push_back(widen(host));
              }
              dst->push_back(backend_->upload(host));
            }
          }
          if (bound) backend_->bind_experts(bank);
          // k distinct experts a row, never the unused one; rows share experts.
          std::vector<int32_t> ids;
          std::vector<float> weights;
          for (int64_t r = 0; r < c.t; ++r) {
            std::vector<int32_t> order(size_t(c.experts - 1));
            std::iota(order.begin(), order.end(), 0);
            std::shuffle(order.begin(), order.end(), rng_);
            for (int64_t j = 0; j < c.k; ++j) ids.push_back(order[size_t(j)]), weights.push_back(uniform(0.05f, 1.0f));
          }
          const Input x = input({c.t, c.hidden});
          Tensor ids_host = Tensor::empty({c.t, c.k}, DType::i32);
          std::copy(ids.begin(), ids.end(), ids_host.data<int32_t>());
          const Tensor ids_dev = backend_->upload(ids_host), weights_dev = upload(weights, {c.t, c.k});
          Tensor y = out({c.t, c.hidden});
          backend_->expert_mlps(bank, x.dev, ids_dev, weights_dev, y, bf16_inputs);
          const std::string what = "expert_mlps t=" + std::to_string(c.t) + " experts=" + std::to_string(c.experts) +
                                   " k=" + std::to_string(c.k) + " hidden=" + std::to_string(c.hidden) + " " +
                                   dtype_name(fmt.dtype) + " bits " + std::to_string(fmt.bits) + " group " +
                                   std::to_string(fmt.group) + " " + dtype_name(params) +
                                   (bf16_inputs ? " bf16 inputs" : "") +
                                   (bound ? " bound" : " unbound");
          expect_close(read(y),
                       expert_mlps_reference(x.host, gate, up, down, ids, weights, c.t, c.k, c.hidden, c.inter, act,
                                             bf16_inputs),
                       bf16_inputs ? 2e-3 : 1e-5, what);
        }
}

TEST_P(OpSuite, ExpertMlpsRejectsBadArguments) {
  ExpertBank bank;
  for (int e = 0; e < 3; ++e) {
    bank.gate.push_back(input({6, 8}).dev);
    bank.up.push_back(input({6, 8}).dev);
    bank.down.push_back(input({8, 6}).dev);
  }
  const Tensor x = input({2, 8}).dev, weights = input({2, 2}).dev, ids_f32 = input({2, 2}).dev;
  Tensor ids_host = Tensor::empty({2, 2}, DType::i32);
  std::fill_n(ids_host.data<int32_t>(), 4, 1);
  const Tensor ids = backend_->upload(ids_host);
  Tensor y = out({2, 8}), y_wide = out({2, 9});
  EXPECT_THROW(backend_->expert_mlps(bank, x, ids_f32, weights, y, false), Error);       // ids must be i32
  EXPECT_THROW(backend_->expert_mlps(bank, x, ids, input({2, 3}).dev, y, false), Error);  // a weight per id
  EXPECT_THROW(backend_->expert_mlps(bank, x, ids, weights, y_wide, false), Error);       // y is x's shape
  ExpertBank wrong = bank;
  wrong.down[1] = input({8, 5}).dev;  // one expert's down disagrees with its gate
  EXPECT_THROW(backend_->expert_mlps(wrong, x, ids, weights, y, false), Error);
  wrong = bank;
  wrong.up.pop_back();  // two up matrices for three experts
  EXPECT_THROW(backend_->expert_mlps(wrong, x, ids, weights, y, false), Error);
}

// ---------------------------------------------------------------------------
// Gated DeltaNet

TEST_P(OpSuite, CausalConv1dSilu) {
  const int64_t channels = 33;
  for (int64_t kernel : {2, 4}) {
    const int64_t past = kernel - 1;
    const Input weight = input({channels, kernel}, 0.5f);
    Input state = input({channels, past});
    // The whole input stream per channel: the initial state, then each call's x.
    std::vector<std::vector<double>> stream(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t j = 0; j < past; ++j) stream[size_t(c)].push_back(state.host[size_t(c * past + j)]);
    // Two calls carrying the state: the first shorter than kernel − 1 (where
    // it applies) so the state is shifted partly by itself.
    for (int64_t t : {std::max<int64_t>(1, past - 1), int64_t(9)}) {
      const Input x = input({t, channels});
      Tensor o = out({t, channels});
      backend_->causal_conv1d_silu(x.dev, weight.dev, state.dev, o);
      std::vector<double> ref(size_t(t * channels));
      for (int64_t c = 0; c < channels; ++c) {
        std::vector<double>& s = stream[size_t(c)];
        const int64_t before = int64_t(s.size());
        for (int64_t ti = 0; ti < t; ++ti) s.push_back(x.host[size_t(ti * channels + c)]);
        for (int64_t ti = 0; ti < t; ++ti) {
          // Tap kernel − 1 on the current token, tap 0 on kernel − 1 tokens back.
          double acc = 0.0;
          for (int64_t j = 0; j < kernel; ++j) acc += weight.host[size_t(c * kernel + j)] * s[size_t(before + ti - past + j)];
          ref[size_t(ti * channels + c)] = silu(acc);
        }
      }
      const std::string what = "causal_conv1d_silu kernel=" + std::to_string(kernel) + " t=" + std::to_string(t);
      expect_close(read(o), ref, 1e-5, what);
      // The state now holds the last kernel − 1 inputs of the stream, oldest first.
      std::vector<float> want_state;
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t j = 0; j < past; ++j) want_state.push_back(float(stream[size_t(c)][stream[size_t(c)].size() - size_t(past - j)]));
      expect_same(read(state.dev), want_state, what + ": state");
    }
  }
}

TEST_P(OpSuite, DeltaRuleGates) {
  for (int64_t t : kRows) {
    const int64_t hv = 5;
    Input b = input({t, hv}, 3.0f);
    const Input a_log = input({hv}, 0.5f), dt_bias = input({hv});
    std::vector<float> a = widen(random_tensor({t, hv}, DType::f32, rng_, 4.0f));
    // Past PyTorch's softplus threshold (linear there; exp would overflow at
    // 100 in f32) and far below it.
    a[0] = 30.0f, a[1] = 100.0f, a[2] = -40.0f;
    std::vector<float> neg_a_values(static_cast<size_t>(hv));
    for (int64_t h = 0; h < hv; ++h) neg_a_values[size_t(h)] = -std::exp(a_log.host[size_t(h)]);
    Tensor a_dev = upload(a, {t, hv});
    const Tensor neg_a = upload(neg_a_values, {hv});
    backend_->delta_rule_gates(b.dev, a_dev, neg_a, dt_bias.dev);
    std::vector<double> beta(b.host.size()), g(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const size_t h = i % size_t(hv);
      beta[i] = sigmoid(b.host[i]);
      g[i] = double(neg_a_values[h]) * softplus(double(a[i]) + dt_bias.host[h]);
    }
    expect_close(read(b.dev), beta, 1e-5, "delta_rule_gates beta t=" + std::to_string(t));
    expect_close(read(a_dev), g, 1e-5, "delta_rule_gates g t=" + std::to_string(t));
    // Norm-wise error hides small entries: check the extremes one by one too.
    const std::vector<float> got_g = read(a_dev);
    for (size_t i = 0; i < std::min<size_t>(3, got_g.size()); ++i)
      EXPECT_NEAR(got_g[i], g[i], 1e-5 * std::fabs(g[i]) + 1e-30) << "g at a = " << a[i];
  }
}

// Inputs of a delta-rule run as a layer makes them: q and k L2-normed per key
// head (q also scaled by key_head_dim^-0.5), log decays g < 0, beta in (0, 1).
struct DeltaRuleInputs {
  std::vector<float> qkv, g, beta;
};

DeltaRuleInputs delta_rule_inputs(const DeltaRuleShape& d, int64_t t, std::mt19937_64& rng) {
  DeltaRuleInputs in;
  const int64_t cols = 2 * d.key_dim() + d.value_dim();
  in.qkv = widen(random_tensor({t, cols}, DType::f32, rng));
  for (int64_t ti = 0; ti < t; ++ti)
    for (int64_t part = 0; part < 2; ++part)  // q, then k
      for (int64_t h = 0; h < d.key_heads; ++h) {
        float* v = in.qkv.data() + ti * cols + part * d.key_dim() + h * d.key_head_dim;
        double ss = 0.0;
        for (int64_t i = 0; i < d.key_head_dim; ++i) ss += double(v[i]) * v[i];
        const double scale = (part == 0 ? 1.0 / std::sqrt(double(d.key_head_dim)) : 1.0) / std::sqrt(ss + 1e-6);
        for (int64_t i = 0; i < d.key_head_dim; ++i) v[i] = float(v[i] * scale);
      }
  in.g = widen(random_tensor({t, d.value_heads}, DType::f32, rng));
  in.beta = widen(random_tensor({t, d.value_heads}, DType::f32, rng, 2.0f));
  for (float& x : in.g) x = -0.4f * std::fabs(x);
  for (float& x : in.beta) x = float(sigmoid(x));
  return in;
}

// The rule token by token in double, per value head h (key head h / group):
//   S ← exp(g)·S;  S ← S + k·(β·(v − Sᵀk))ᵀ;  o = Sᵀq.
// state [value_heads, key_head_dim, value_head_dim] advances; `after`, when
// given, receives the state after every token.
std::vector<double> delta_rule_reference(const DeltaRuleShape& d, const DeltaRuleInputs& in, int64_t t,
                                         std::vector<double>& state,
                                         std::vector<std::vector<double>>* after = nullptr) {
  const int64_t dk = d.key_head_dim, dv = d.value_head_dim, hv = d.value_heads, cols = 2 * d.key_dim() + d.value_dim();
  const int64_t group = d.value_heads / d.key_heads;
  std::vector<double> out(size_t(t * d.value_dim()));
  std::vector<double> delta(static_cast<size_t>(dv));
  for (int64_t ti = 0; ti < t; ++ti) {
    for (int64_t h = 0; h < hv; ++h) {
      double* s = state.data() + h * dk * dv;
      const float* q = in.qkv.data() + ti * cols + (h / group) * dk;
      const float* k = q + d.key_dim();
      const float* v = in.qkv.data() + ti * cols + 2 * d.key_dim() + h * dv;
      const double decay = std::exp(double(in.g[size_t(ti * hv + h)])), beta = in.beta[size_t(ti * hv + h)];
      for (int64_t x = 0; x < dk * dv; ++x) s[x] *= decay;
      for (int64_t b = 0; b < dv; ++b) {
        double pred = 0.0;
        for (int64_t a = 0; a < dk; ++a) pred += k[a] * s[a * dv + b];
        delta[size_t(b)] = beta * (v[b] - pred);
      }
      for (int64_t a = 0; a < dk; ++a)
        for (int64_t b = 0; b < dv; ++b) s[a * dv + b] += k[a] * delta[size_t(b)];
      for (int64_t b = 0; b < dv; ++b) {
        double o = 0.0;
        for (int64_t a = 0; a < dk; ++a) o += q[a] * s[a * dv + b];
        out[size_t(ti * d.value_dim() + h * dv + b)] = o;
      }
    }
    if (after) after->push_back(state);
  }
  return out;
}

TEST_P(OpSuite, GatedDeltaRule) {
  // Two value heads per key head; key and value head sizes differ.
  const DeltaRuleShape d{2, 4, 16, 24};
  const int64_t state_numel = d.value_heads * d.key_head_dim * d.value_head_dim;
  // Token by token, and chunks of 16 and 64 (70 tokens: full chunks and a tail).
  for (int64_t chunk : {0, 16, 64})
    for (int64_t t : {1, 7, 70}) {
      const DeltaRuleInputs in = delta_rule_inputs(d, t, rng_);
      const Input state = input({d.value_heads, d.key_head_dim, d.value_head_dim}, 0.3f);
      const Tensor qkv = upload(in.qkv, {t, 2 * d.key_dim() + d.value_dim()});
      const Tensor g = upload(in.g, {t, d.value_heads}), beta = upload(in.beta, {t, d.value_heads});
      Tensor o = out({t, d.value_dim()});
      Tensor state_dev = state.dev;
      backend_->gated_delta_rule(d, qkv, g, beta, chunk, state_dev, o);
      std::vector<double> ref_state = to_double(state.host);
      ASSERT_EQ(int64_t(ref_state.size()), state_numel);
      const std::vector<double> ref = delta_rule_reference(d, in, t, ref_state);
      const std::string what = "gated_delta_rule chunk=" + std::to_string(chunk) + " t=" + std::to_string(t);
      expect_close(read(o), ref, 1e-5, what + ": out");
      expect_close(read(state_dev), ref_state, 1e-5, what + ": state");
    }
}

TEST_P(OpSuite, GatedDeltaRuleHistory) {
  const DeltaRuleShape d{1, 3, 8, 12};
  const int64_t state_numel = d.value_heads * d.key_head_dim * d.value_head_dim;
  const int64_t t = 5, history_rows = 6, history_row = 3;
  const DeltaRuleInputs in = delta_rule_inputs(d, t, rng_);
  const Input state = input({d.value_heads, d.key_head_dim, d.value_head_dim}, 0.3f);
  const Input history = input({history_rows, d.value_heads, d.key_head_dim, d.value_head_dim});
  const Tensor qkv = upload(in.qkv, {t, 2 * d.key_dim() + d.value_dim()});
  const Tensor g = upload(in.g, {t, d.value_heads}), beta = upload(in.beta, {t, d.value_heads});
  Tensor o = out({t, d.value_dim()});
  Tensor state_dev = state.dev, history_dev = history.dev;
  backend_->gated_delta_rule(d, qkv, g, beta, 0, state_dev, o, &history_dev, history_row);
  std::vector<double> ref_state = to_double(state.host);
  std::vector<std::vector<double>> after;
  const std::vector<double> ref = delta_rule_reference(d, in, t, ref_state, &after);
  expect_close(read(o), ref, 1e-5, "gated_delta_rule with history: out");
  expect_close(read(state_dev), ref_state, 1e-5, "gated_delta_rule with history: state");
  // Rows 3, 4, 5 hold the states after tokens 0, 1, 2; tokens 3 and 4 would
  // go to rows 6 and 7, which do not exist; rows 0-2 keep their values.
  const std::vector<float> got = read(history_dev);
  for (int64_t row = 0; row < history_rows; ++row) {
    const std::vector<float> got_row(got.begin() + row * state_numel, got.begin() + (row + 1) * state_numel);
    if (row < history_row) {
      const std::vector<float> was(history.host.begin() + row * state_numel,
                                   history.host.begin() + (row + 1) * state_numel);
      expect_same(got_row, was, "history row " + std::to_string(row) + " (before history_row)");
    } else {
      expect_close(got_row, after[size_t(row - history_row)], 1e-5,
                   "history row " + std::to_string(row) + " = state after token " + std::to_string(row - history_row));
    }
  }
}

TEST_P(OpSuite, DeltaNetRejectsBadArguments) {
  // causal_conv1d_silu
  const Tensor x = input({5, 8}).dev, weight = input({8, 4}).dev;
  Tensor state = input({8, 3}).dev, state_bad = input({8, 4}).dev, o = out({5, 8}), o_bad = out({5, 7});
  EXPECT_THROW(backend_->causal_conv1d_silu(x, weight, state_bad, o), Error);  // state must be [channels, kernel − 1]
  EXPECT_THROW(backend_->causal_conv1d_silu(x, weight, state, o_bad), Error);
  Tensor alias = x;
  EXPECT_THROW(backend_->causal_conv1d_silu(x, weight, state, alias), Error);  // out may not alias x
  // delta_rule_gates
  Tensor b = input({5, 4}).dev, a = input({5, 4}).dev, a_bad = input({5, 3}).dev;
  const Tensor neg_a = input({4}).dev, neg_a_bad = input({3}).dev, dt_bias = input({4}).dev;
  EXPECT_THROW(backend_->delta_rule_gates(b, a_bad, neg_a, dt_bias), Error);
  EXPECT_THROW(backend_->delta_rule_gates(b, a, neg_a_bad, dt_bias), Error);
  // gated_delta_rule
  const DeltaRuleShape d{1, 2, 4, 4};
  const Tensor qkv = input({3, 2 * 4 + 8}).dev, qkv_bad = input({3, 2 * 4 + 7}).dev;
  const Tensor g = input({3, 2}).dev, beta = input({3, 2}).dev, g_bad = input({2, 2}).dev;
  Tensor s = input({2, 4, 4}).dev, s_bad = input({2, 4, 3}).dev, out_rule = out({3, 8});
  EXPECT_THROW(backend_->gated_delta_rule(d, qkv_bad, g, beta, 0, s, out_rule), Error);  // qkv columns
  EXPECT_THROW(backend_->gated_delta_rule(d, qkv, g_bad, beta, 0, s, out_rule), Error);  // g rows
  EXPECT_THROW(backend_->gated_delta_rule(d, qkv, g, beta, 0, s_bad, out_rule), Error);  // state size
  EXPECT_THROW(backend_->gated_delta_rule(d, qkv, g, beta, -1, s, out_rule), Error);     // negative chunk
  EXPECT_THROW(backend_->gated_delta_rule(DeltaRuleShape{2, 3, 2, 4}, qkv, g, beta, 0, s, out_rule), Error);
  Tensor history_bad = input({4, 31}).dev;  // rows that are not states
  EXPECT_THROW(backend_->gated_delta_rule(d, qkv, g, beta, 0, s, out_rule, &history_bad, 0), Error);
}

// ---------------------------------------------------------------------------
// Attention and the KV rows it reads

// Causal attention in double. q [t, heads, d] at positions first_position + i;
// k, v [n, kv_heads, d] hold positions 0..n-1 (rows the cache dropped are NaN,
// so using one shows). Query head h reads kv head h / (heads / kv_heads).
std::vector<double> attention_reference(const std::vector<float>& q, int64_t t, int64_t heads,
                                        const std::vector<float>& k, const std::vector<float>& v, int64_t kv_heads,
                                        int64_t d, const AttentionParams& p) {
  std::vector<double> out(size_t(t * heads * d));
  const int64_t group = heads / kv_heads;
  for (int64_t i = 0; i < t; ++i) {
    const int64_t pos = p.first_position + i;
    const int64_t lo = p.window ? std::max<int64_t>(0, pos - *p.window + 1) : 0;
    for (int64_t h = 0; h < heads; ++h) {
      const float* qr = q.data() + (i * heads + h) * d;
      std::vector<double> score(size_t(pos - lo + 1));
      double mx = -INFINITY;
      for (int64_t j = lo; j <= pos; ++j) {
        const float* kr = k.data() + (j * kv_heads + h / group) * d;
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += double(qr[c]) * kr[c];
        score[size_t(j - lo)] = dot * p.scale;
        mx = std::max(mx, score[size_t(j - lo)]);
      }
      double sum = 0.0;
      for (double& s : score) sum += s = std::exp(s - mx);
      double* o = out.data() + (i * heads + h) * d;
      for (int64_t j = lo; j <= pos; ++j) {
        const float* vr = v.data() + (j * kv_heads + h / group) * d;
        for (int64_t c = 0; c < d; ++c) o[c] += score[size_t(j - lo)] / sum * vr[c];
      }
    }
  }
  return out;
}

bool is_coded(const KvFormat& f) { return f.codec != KvFormat::Codec::plain; }

// Stored rows read back (positions [first, first + n)) against the rows
// appended there: exact for f32, the bf16 rounding of each value for bf16,
// within the codec's error (relative to the rows' norm) for coded formats.
void expect_rows_as_appended(const std::vector<float>& got, const std::vector<float>& appended, int64_t first,
                             int64_t row_floats, const KvFormat& f, double tolerance, const std::string& what) {
  std::vector<float> want(appended.begin() + first * row_floats, appended.begin() + first * row_floats + int64_t(got.size()));
  if (is_coded(f)) return expect_close(got, to_double(want), tolerance, what);
  if (f.dtype == DType::bf16)
    for (float& x : want) x = round_bf16(x);
  expect_same(got, want, what);
}

void OpSuite::check_attention(const AttentionCase& c) {
  const int64_t d = c.head_dim, row_floats = c.kv_heads * d;
  auto pool = std::make_shared<KvBlockPool>(4096, backend_);
  const KvFormat format = c.codec.format(c.kv_heads, d, c.plain_dtype, pool->block_bytes());
  const int64_t capacity = std::accumulate(c.steps.begin(), c.steps.end(), int64_t(0));
  const int64_t step = *std::max_element(c.steps.begin(), c.steps.end());
  PagedKvLayer layer(pool, format, capacity, c.window, step, rng_());
  const std::string name = c.codec.label() + (is_coded(format) ? "" : std::string(" ") + dtype_name(c.plain_dtype)) +
                           " heads=" + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                           " d=" + std::to_string(d) + " block_rows=" + std::to_string(format.block_rows) +
                           (c.window ? " window=" + std::to_string(*c.window) : "");
  std::vector<float> k_all, v_all;  // every row appended, position by position
  int64_t length = 0;
  for (int64_t n : c.steps) {
    const Input k = input({n, c.kv_heads, d}), v = input({n, c.kv_heads, d}), q = input({n, c.heads, d});
    layer.append(k.dev, v.dev);
    k_all.insert(k_all.end(), k.host.begin(), k.host.end());
    v_all.insert(v_all.end(), v.host.begin(), v.host.end());
    AttentionParams p;
    p.scale = 1.0f / std::sqrt(float(d));
    p.first_position = length;  // the step's queries are its own rows
    p.window = c.window;
    p.bf16_inputs = c.bf16_inputs;
    length += n;
    const std::string what = name + ", " + std::to_string(n) + " queries at " + std::to_string(p.first_position);

    const KvView view = layer.view();
    ASSERT_EQ(view.end_position(), length) << what;
    Tensor k_read = out({view.length, c.kv_heads, d}), v_read = out({view.length, c.kv_heads, d});
    backend_->kv_read(view, 0, k_read, v_read);
    const std::vector<float> k_held = read(k_read), v_held = read(v_read);
    expect_rows_as_appended(k_held, k_all, view.first_position, row_floats, format, c.read_tolerance, what + ": kv_read K");
    expect_rows_as_appended(v_held, v_all, view.first_position, row_floats, format, c.read_tolerance, what + ": kv_read V");

    // The reference attends over the rows as appended (bf16-rounded for a
    // bf16 cache) or, for a coded cache, over what kv_read decoded; rows the
    // cache dropped are NaN so that using one shows.
    std::vector<float> k_ref(k_all.size(), NAN), v_ref(v_all.size(), NAN);
    for (size_t i = size_t(view.first_position * row_floats); i < k_all.size(); ++i) {
      const size_t held = i - size_t(view.first_position * row_floats);
      if (is_coded(format)) {
        k_ref[i] = k_held[held], v_ref[i] = v_held[held];
      } else if (format.dtype == DType::bf16) {
        k_ref[i] = round_bf16(k_all[i]), v_ref[i] = round_bf16(v_all[i]);
      } else {
        k_ref[i] = k_all[i], v_ref[i] = v_all[i];
      }
    }
    Tensor o = out({n, c.heads, d});
    backend_->attention(q.dev, view, p, o);
    // Coded rows are decoded (and turbo's rotated back) inside the kernel, a
    // few roundings the kv_read rows do not share: 1e-4 there. Queries and
    // probabilities rounded to bf16 (relative errors up to 2^-9 each, about
    // 2^-9 / √3 rms) leave about 2e-3 in the output: 5e-3 there.
    const double tolerance = c.bf16_inputs ? 5e-3 : is_coded(format) ? 1e-4 : 1e-5;
    expect_close(read(o), attention_reference(q.host, n, c.heads, k_ref, v_ref, c.kv_heads, d, p), tolerance,
                 what + ": attention");
  }
  // The case exercised what it is there for: several blocks, and a sliding
  // window that has dropped rows.
  EXPECT_GT(layer.bytes(), 2 * pool->block_bytes()) << name << ": fewer than three blocks held";
  if (c.window) {
    const KvView view = layer.view();
    EXPECT_GT(view.first_position, 0) << name << ": the window dropped nothing";
  }
}

// A 40-row prompt, a second 40-row chunk after the cached rows, then decode
// steps, over many 4-row blocks.
TEST_P(OpSuite, AttentionF32PrefillAndDecode) {
  check_attention({LayerCodec{}, DType::f32, 8, 2, 64, std::nullopt, {40, 40, 1, 1}, 0.0});
}

TEST_P(OpSuite, AttentionBf16HeadDim128) {
  check_attention({LayerCodec{}, DType::bf16, 4, 2, 128, std::nullopt, {1, 40, 7, 1}, 0.0});
}

// Decode and verify rows (up to 16) over bf16 rows, after prompts long
// enough for a device to split the keys several ways and walk each split in
// several passes: head dims 64, 128 and 256, query groups of 1 to 8, and a
// group of 16 (a device's general kernel).
TEST_P(OpSuite, AttentionBf16DecodeRows) {
  check_attention({LayerCodec{}, DType::bf16, 16, 8, 128, std::nullopt, {300, 1, 1, 16, 3}, 0.0});
  check_attention({LayerCodec{}, DType::bf16, 8, 1, 64, std::nullopt, {700, 1, 5}, 0.0});
  check_attention({LayerCodec{}, DType::bf16, 12, 4, 256, std::nullopt, {150, 1, 2}, 0.0});
  check_attention({LayerCodec{}, DType::bf16, 4, 4, 128, std::nullopt, {90, 1}, 0.0});
  check_attention({LayerCodec{}, DType::bf16, 16, 1, 64, std::nullopt, {200, 1}, 0.0});
  check_attention({LayerCodec{}, DType::bf16, 8, 2, 128, 100, {64, 64, 64, 64, 1, 3, 1}, 0.0});
}

// Prefill rows in bf16 compute over bf16 rows (a device's tensor cores):
// head dims 64 to 256, query groups of 1 to 16 (a block of query rows
// holding parts of a token's heads; decode rows whose group a device's
// decode kernel spreads over several blocks, the last one part full), rows
// not filling a block, a sliding window, and a short chunk after a long
// prompt (keys split).
TEST_P(OpSuite, AttentionBf16Inputs) {
  check_attention({LayerCodec{}, DType::bf16, 8, 2, 128, std::nullopt, {300, 40, 1, 17}, 0.0, true});
  check_attention({LayerCodec{}, DType::bf16, 16, 1, 64, std::nullopt, {100, 70, 3}, 0.0, true});
  check_attention({LayerCodec{}, DType::bf16, 4, 4, 128, 100, {64, 64, 64, 64, 20, 1}, 0.0, true});
  check_attention({LayerCodec{}, DType::bf16, 8, 2, 64, std::nullopt, {1200, 24}, 0.0, true});
  check_attention({LayerCodec{}, DType::bf16, 12, 2, 128, std::nullopt, {90, 1, 3}, 0.0, true});
  check_attention({LayerCodec{}, DType::bf16, 6, 2, 256, 50, {30, 30, 30, 1, 2, 1}, 0.0, true});
}

TEST_P(OpSuite, AttentionSlidingWindow) {
  check_attention({LayerCodec{}, DType::f32, 6, 3, 64, 16, {40, 40, 1, 1, 7}, 0.0});
  // MHA, head_dim 128, bf16 rows.
  check_attention({LayerCodec{}, DType::bf16, 4, 4, 128, 24, {33, 1, 40, 1}, 0.0});
}

// Tolerances of kv_read for coded rows, relative to the rows' norm (unit
// normal values): affine steps are a group's range (about 4.5 for 32-64
// normal values) over 2^bits − 1 levels, an error of step / √12 rms, about
// 0.005 at 8 bits and 0.08 at 4 bits with group 32; TurboQuant's Lloyd–Max
// codebooks have relative MSE 0.035 at 3 bits and 0.0095 at 4 (errors of
// about 0.19 and 0.10).
constexpr double kAffine8ReadTolerance = 0.01, kAffine4ReadTolerance = 0.15, kTurboK3V4ReadTolerance = 0.25;

TEST_P(OpSuite, AttentionAffine8) {
  check_attention({LayerCodec{LayerCodec::Kind::affine, 8, 64}, DType::f32, 6, 2, 64, std::nullopt, {40, 9, 1},
                   kAffine8ReadTolerance});
}

// K at 3 bits and V at 4, in a sliding layer.
TEST_P(OpSuite, AttentionTurbo) {
  check_attention({LayerCodec{LayerCodec::Kind::turbo, 16, 64, 3, 4}, DType::f32, 4, 2, 64, 24, {40, 40, 40, 1},
                   kTurboK3V4ReadTolerance});
}

// Decode and verify rows over coded rows after prompts long enough to split
// the keys (a device's decode kernel unpacks the codes in registers): affine
// at every width (2, 3, 6 bits pack 8 values in bytes that are not a power
// of two), groups of 32 to 128, TurboQuant with different K and V widths,
// head dims 64 to 256, query groups of 1 to 6, a sliding window.
TEST_P(OpSuite, AttentionCodedDecodeRows) {
  using K = LayerCodec::Kind;
  check_attention({LayerCodec{K::affine, 4, 32}, DType::f32, 8, 2, 128, std::nullopt, {300, 1, 16, 3},
                   kAffine4ReadTolerance});
  check_attention({LayerCodec{K::affine, 8, 128}, DType::f32, 4, 4, 128, std::nullopt, {200, 1, 2},
                   kAffine8ReadTolerance});
  check_attention({LayerCodec{K::affine, 6, 64}, DType::f32, 12, 2, 64, std::nullopt, {150, 1, 5}, 0.05});
  check_attention({LayerCodec{K::affine, 3, 32}, DType::f32, 8, 1, 64, std::nullopt, {400, 1}, 0.3});
  check_attention({LayerCodec{K::affine, 2, 64}, DType::f32, 4, 2, 256, 50, {60, 60, 60, 60, 1, 2}, 0.6});
  check_attention({LayerCodec{K::turbo, 16, 64, 4, 2}, DType::f32, 8, 1, 128, std::nullopt, {300, 1, 5}, 0.5});
  check_attention({LayerCodec{K::turbo, 16, 64, 2, 3}, DType::f32, 6, 2, 256, std::nullopt, {100, 1}, 0.5});
}

// Every step claims each sequence's rows, writes all of them with one
// kv_write and attends with one attention; each segment's output must be
// that sequence's own attention over its rows (the reference in double).
void OpSuite::check_attention_segments(const SegmentsCase& c) {
  const int64_t d = c.head_dim, row_floats = c.kv_heads * d, n = int64_t(c.prompts.size());
  auto pool = std::make_shared<KvBlockPool>(4096, backend_);
  std::vector<std::unique_ptr<PagedKvLayer>> layers;
  std::vector<std::vector<float>> k_all(static_cast<size_t>(n)), v_all(static_cast<size_t>(n));
  std::vector<KvFormat> formats;
  int64_t longest_step = *std::max_element(c.prompts.begin(), c.prompts.end());  // a prompt is one step
  for (const auto& step : c.steps) longest_step = std::max(longest_step, *std::max_element(step.begin(), step.end()));
  for (int64_t i = 0; i < n; ++i) {
    int64_t capacity = c.prompts[size_t(i)];
    for (const auto& step : c.steps) capacity += step[size_t(i)];
    formats.push_back(c.codecs[size_t(i)].format(c.kv_heads, d, c.plain_dtype, pool->block_bytes()));
    layers.push_back(std::make_unique<PagedKvLayer>(pool, formats.back(), capacity, c.window, longest_step, rng_()));
    const Input k = input({c.prompts[size_t(i)], c.kv_heads, d}), v = input({c.prompts[size_t(i)], c.kv_heads, d});
    layers.back()->append(k.dev, v.dev);
    k_all[size_t(i)] = k.host, v_all[size_t(i)] = v.host;
  }
  AttentionParams p;
  p.scale = 1.0f / std::sqrt(float(d));
  p.window = c.window;
  for (const auto& step : c.steps) {
    const int64_t t = std::accumulate(step.begin(), step.end(), int64_t(0));
    const Input k = input({t, c.kv_heads, d}), v = input({t, c.kv_heads, d}), q = input({t, c.heads, d});
    std::vector<KvSegment> segments;
    int64_t row = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t first = layers[size_t(i)]->length(), rows = step[size_t(i)];
      layers[size_t(i)]->claim(rows);
      segments.push_back({layers[size_t(i)]->view(), row, rows, first});
      k_all[size_t(i)].insert(k_all[size_t(i)].end(), k.host.begin() + row * row_floats,
                              k.host.begin() + (row + rows) * row_floats);
      v_all[size_t(i)].insert(v_all[size_t(i)].end(), v.host.begin() + row * row_floats,
                              v.host.begin() + (row + rows) * row_floats);
      row += rows;
    }
    backend_->kv_write(segments, k.dev, v.dev);
    Tensor o = out({t, c.heads, d});
    backend_->attention(q.dev, segments, p, o);
    const std::vector<float> got = read(o);
    for (int64_t i = 0; i < n; ++i) {
      const KvSegment& s = segments[size_t(i)];
      const KvFormat& f = formats[size_t(i)];
      const std::string what = c.codecs[size_t(i)].label() + " sequence " + std::to_string(i) + " of " +
                               std::to_string(n) + ", " + std::to_string(s.rows) + " rows at " +
                               std::to_string(s.first_position);
      // Rows as stored: bf16-rounded, or decoded by kv_read for a coded
      // layer; rows a window dropped are NaN.
      const std::vector<float>& ka = k_all[size_t(i)];
      const std::vector<float>& va = v_all[size_t(i)];
      std::vector<float> k_ref(ka.size(), NAN), v_ref(va.size(), NAN);
      const size_t held_from = size_t(s.kv.first_position * row_floats);
      if (is_coded(f)) {
        Tensor kr = out({s.kv.length, c.kv_heads, d}), vr = out({s.kv.length, c.kv_heads, d});
        backend_->kv_read(s.kv, 0, kr, vr);
        const std::vector<float> kh = read(kr), vh = read(vr);
        std::copy(kh.begin(), kh.end(), k_ref.begin() + ptrdiff_t(held_from));
        std::copy(vh.begin(), vh.end(), v_ref.begin() + ptrdiff_t(held_from));
      } else {
        for (size_t j = held_from; j < ka.size(); ++j) {
          const bool bf16 = f.dtype == DType::bf16;
          k_ref[j] = bf16 ? round_bf16(ka[j]) : ka[j];
          v_ref[j] = bf16 ? round_bf16(va[j]) : va[j];
        }
      }
      AttentionParams at = p;
      at.first_position = s.first_position;
      const std::vector<float> q_rows(q.host.begin() + s.row * c.heads * d,
                                      q.host.begin() + (s.row + s.rows) * c.heads * d);
      const std::vector<float> got_rows(got.begin() + s.row * c.heads * d, got.begin() + (s.row + s.rows) * c.heads * d);
      expect_close(got_rows, attention_reference(q_rows, s.rows, c.heads, k_ref, v_ref, c.kv_heads, d, at),
                   is_coded(f) ? 1e-4 : 1e-5, what);
    }
  }
}

// Decode and verify rows of sequences of different lengths over bf16 rows
// (a device's one-launch path), in full and sliding layers; sequences whose
// layers differ in format, or whose rows are too many for decode (a device
// takes them one by one); f32 rows.
TEST_P(OpSuite, AttentionOverSegments) {
  const LayerCodec plain{}, affine8{LayerCodec::Kind::affine, 8, 64};
  check_attention_segments({{plain, plain, plain, plain}, DType::bf16, 16, 8, 128, std::nullopt, {300, 40, 1000, 7},
                            {{1, 1, 1, 1}, {3, 1, 16, 2}, {1, 1, 1, 1}}});
  check_attention_segments({{plain, plain, plain}, DType::bf16, 8, 2, 64, 100, {250, 30, 120}, {{1, 1, 1}, {4, 2, 1}}});
  check_attention_segments({{plain, affine8}, DType::bf16, 8, 2, 64, std::nullopt, {50, 60}, {{1, 1}, {2, 3}}});
  check_attention_segments({{plain, plain}, DType::f32, 8, 2, 64, std::nullopt, {20, 33}, {{17, 1}, {1, 1}}});
  check_attention_segments({{plain, plain}, DType::bf16, 12, 4, 256, std::nullopt, {90, 500}, {{1, 1}, {1, 20}}});
}

// kv_write into rows in the middle of a layer (across a block boundary):
// those rows read back as written, all others as they were; kv_read from a
// row inside the layer reads the same rows as a read of everything.
void OpSuite::check_kv_write_read(const LayerCodec& codec, DType plain_dtype, double tolerance) {
  const int64_t kv_heads = 2, d = 64, row_floats = kv_heads * d;
  auto pool = std::make_shared<KvBlockPool>(4096, backend_);
  const KvFormat format = codec.format(kv_heads, d, plain_dtype, pool->block_bytes());
  // Coded formats fit more rows into a block: size the rows by the block.
  const int64_t b = format.block_rows, row0 = b / 2 + 1, count = b + 3, n = row0 + count + b / 2 + 2;
  const int64_t part0 = row0 - 1, part_count = count;  // a partial read straddling the written rows
  const std::string what = codec.label() + " " + dtype_name(plain_dtype);
  PagedKvLayer layer(pool, format, n, std::nullopt, n, rng_());
  const Input k = input({n, kv_heads, d}), v = input({n, kv_heads, d});
  layer.append(k.dev, v.dev);
  const KvView view = layer.view();
  Tensor k_before = out({n, kv_heads, d}), v_before = out({n, kv_heads, d});
  backend_->kv_read(view, 0, k_before, v_before);
  const std::vector<float> kb = read(k_before), vb = read(v_before);
  expect_rows_as_appended(kb, k.host, 0, row_floats, format, tolerance, what + ": K as appended");
  expect_rows_as_appended(vb, v.host, 0, row_floats, format, tolerance, what + ": V as appended");

  const Input k2 = input({count, kv_heads, d}), v2 = input({count, kv_heads, d});
  backend_->kv_write(view, row0, k2.dev, v2.dev);
  Tensor k_after = out({n, kv_heads, d}), v_after = out({n, kv_heads, d});
  backend_->kv_read(view, 0, k_after, v_after);
  const std::vector<float> ka = read(k_after), va = read(v_after);
  auto rows = [&](const std::vector<float>& all, int64_t from, int64_t to) {
    return std::vector<float>(all.begin() + from * row_floats, all.begin() + to * row_floats);
  };
  expect_same(rows(ka, 0, row0), rows(kb, 0, row0), what + ": K rows before the write");
  expect_same(rows(va, row0 + count, n), rows(vb, row0 + count, n), what + ": V rows after the write");
  expect_same(rows(ka, row0 + count, n), rows(kb, row0 + count, n), what + ": K rows after the write");
  expect_same(rows(va, 0, row0), rows(vb, 0, row0), what + ": V rows before the write");
  expect_rows_as_appended(rows(ka, row0, row0 + count), k2.host, 0, row_floats, format, tolerance, what + ": K written");
  expect_rows_as_appended(rows(va, row0, row0 + count), v2.host, 0, row_floats, format, tolerance, what + ": V written");

  Tensor k_part = out({part_count, kv_heads, d}), v_part = out({part_count, kv_heads, d});
  backend_->kv_read(view, part0, k_part, v_part);
  expect_same(read(k_part), rows(ka, part0, part0 + part_count), what + ": kv_read from row " + std::to_string(part0));
  expect_same(read(v_part), rows(va, part0, part0 + part_count), what + ": kv_read from row " + std::to_string(part0));
}

// rope_kv_write gives what its ops give in turn (rope or rms_norm_rope on q
// and on k, then kv_write), bit for bit: q and k as turned, and every row of
// the view after; plain rows (a device's one launch) and coded ones (its
// launch for q and k, then the write), one row and a few, q and k of other
// head counts, with and without the norms.
TEST_P(OpSuite, RopeKvWriteAsTheOpsInTurn) {
  const float eps = 1e-6f;
  const int64_t heads = 4, kv_heads = 2, d = 64, half = 32, n = 9, row0 = 2;
  for (const auto& [codec, dtype] : {std::pair{LayerCodec{}, DType::f32}, std::pair{LayerCodec{}, DType::bf16},
                                     std::pair{LayerCodec{LayerCodec::Kind::affine, 8, 64}, DType::f32}})
    for (int64_t t : {1, 5})
      for (bool normed : {false, true}) {
        auto pool = std::make_shared<KvBlockPool>(4096, backend_);
        const KvFormat format = codec.format(kv_heads, d, dtype, pool->block_bytes());
        const uint64_t seed = rng_();
        PagedKvLayer apart(pool, format, n, std::nullopt, n, seed), together(pool, format, n, std::nullopt, n, seed);
        const Input k0 = input({n, kv_heads, d}), v0 = input({n, kv_heads, d});
        apart.append(k0.dev, v0.dev);
        together.append(k0.dev, v0.dev);
        const Input q = input({t, heads, d}, 3.0f), k = input({t, kv_heads, d}, 3.0f), v = input({t, kv_heads, d});
        const Input wq = input({d}), wk = input({d});
        std::vector<float> c(size_t(t * half)), s(c.size());
        for (size_t i = 0; i < c.size(); ++i) {
          const float angle = uniform(-10.0f, 10.0f);
          c[i] = std::cos(angle), s[i] = std::sin(angle);
        }
        const Tensor cos = upload(c, {t, half}), sin = upload(s, {t, half});
        Tensor q_apart = upload(q.host, {t, heads, d}), k_apart = upload(k.host, {t, kv_heads, d});
        Tensor q_together = upload(q.host, {t, heads, d}), k_together = upload(k.host, {t, kv_heads, d});

        if (normed) {
          backend_->rms_norm_rope(q_apart, wq.dev, eps, cos, sin);
          backend_->rms_norm_rope(k_apart, wk.dev, eps, cos, sin);
        } else {
          backend_->rope(q_apart, cos, sin);
          backend_->rope(k_apart, cos, sin);
        }
        backend_->kv_write(apart.view(), row0, k_apart, v.dev);
        const KvView view = together.view();
        const KvSegment segment{view, 0, t, view.first_position + row0};
        Backend::QkNorms norms;
        if (normed) norms = {&wq.dev, &wk.dev, eps};
        backend_->rope_kv_write(std::span(&segment, 1), q_together, k_together, v.dev, norms, cos, sin);

        const std::string name = codec.label() + " " + dtype_name(dtype) + " t=" + std::to_string(t) +
                                 (normed ? " normed" : "");
        expect_same(read(q_together), read(q_apart), name + ": q");
        expect_same(read(k_together), read(k_apart), name + ": k");
        Tensor ka = out({n, kv_heads, d}), va = out({n, kv_heads, d}), kt = out({n, kv_heads, d}),
               vt = out({n, kv_heads, d});
        backend_->kv_read(apart.view(), 0, ka, va);
        backend_->kv_read(together.view(), 0, kt, vt);
        expect_same(read(kt), read(ka), name + ": the view's keys");
        expect_same(read(vt), read(va), name + ": the view's values");
      }
}

TEST_P(OpSuite, KvWriteRead) {
  check_kv_write_read(LayerCodec{}, DType::f32, 0.0);
  check_kv_write_read(LayerCodec{}, DType::bf16, 0.0);
  check_kv_write_read(LayerCodec{LayerCodec::Kind::affine, 8, 64}, DType::f32, kAffine8ReadTolerance);
  check_kv_write_read(LayerCodec{LayerCodec::Kind::affine, 4, 32}, DType::f32, kAffine4ReadTolerance);
  check_kv_write_read(LayerCodec{LayerCodec::Kind::turbo, 16, 64, 3, 4}, DType::f32, kTurboK3V4ReadTolerance);
}

TEST_P(OpSuite, AttentionAndKvRejectBadArguments) {
  const int64_t kv_heads = 2, d = 64;
  auto pool = std::make_shared<KvBlockPool>(4096, backend_);
  const KvFormat format = LayerCodec{}.format(kv_heads, d, DType::f32, pool->block_bytes());
  PagedKvLayer layer(pool, format, 10, std::nullopt, 10, 0);
  layer.append(input({10, kv_heads, d}).dev, input({10, kv_heads, d}).dev);
  const KvView view = layer.view();
  AttentionParams p;
  p.first_position = 8;
  const Tensor q3 = input({3, 4, d}).dev;
  Tensor o3 = out({3, 4, d});
  EXPECT_THROW(backend_->attention(q3, view, p, o3), Error);  // queries at 8..10, the cache ends at 10
  p.first_position = 0;
  const Tensor q_dim = input({1, 4, 32}).dev, q_heads = input({1, 3, d}).dev;
  Tensor o_dim = out({1, 4, 32}), o_heads = out({1, 3, d}), o_other = out({1, 4, d + 1});
  EXPECT_THROW(backend_->attention(q_dim, view, p, o_dim), Error);      // head_dim 32 against 64
  EXPECT_THROW(backend_->attention(q_heads, view, p, o_heads), Error);  // 3 heads over 2 kv heads
  const Tensor q1 = input({1, 4, d}).dev;
  EXPECT_THROW(backend_->attention(q1, view, p, o_other), Error);  // out is not q's shape
  const Tensor k3 = input({3, kv_heads, d}).dev, k_heads = input({3, 1, d}).dev;
  EXPECT_THROW(backend_->kv_write(view, 8, k3, k3), Error);  // rows 8..11 of 10
  EXPECT_THROW(backend_->kv_write(view, 0, k_heads, k_heads), Error);
  Tensor r3 = out({3, kv_heads, d}), r_dim = out({3, kv_heads, d - 1});
  EXPECT_THROW(backend_->kv_read(view, 9, r3, r3), Error);
  EXPECT_THROW(backend_->kv_read(view, 0, r_dim, r_dim), Error);

  // Segments must cover q's rows in order.
  const KvSegment gap[] = {{view, 0, 1, 9}, {view, 2, 1, 9}};
  Tensor o3s = out({3, 4, d});
  EXPECT_THROW(backend_->attention(q3, gap, p, o3s), Error);   // row 1 skipped
  EXPECT_THROW(backend_->kv_write(gap, k3, k3), Error);
  const KvSegment short_cover[] = {{view, 0, 2, 8}};
  EXPECT_THROW(backend_->attention(q3, short_cover, p, o3s), Error);  // 2 of 3 rows
  const KvSegment past_end[] = {{view, 0, 3, 8}};
  EXPECT_THROW(backend_->kv_write(past_end, k3, k3), Error);  // positions 8..11 of 10

  // A sliding layer that dropped rows: a query without that window needs them.
  PagedKvLayer sliding(pool, format, 60, 8, 20, 0);
  for (int i = 0; i < 3; ++i) sliding.append(input({20, kv_heads, d}).dev, input({20, kv_heads, d}).dev);
  ASSERT_GT(sliding.first_position(), 0);
  AttentionParams unwindowed;
  unwindowed.first_position = 59;
  Tensor o1 = out({1, 4, d});
  EXPECT_THROW(backend_->attention(q1, sliding.view(), unwindowed, o1), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, OpSuite, ::testing::Values(std::string("cpu"), std::string("cuda")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace fathom
