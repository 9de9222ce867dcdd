// The memory contract against what the engine really allocates, on every
// committed tiny model of a real architecture (tests/fixtures/parity): dense,
// sliding-window, KV-shared, MoE and hybrid (Gated DeltaNet) models, in f32
// and bf16 compute, under plain, affine and TurboQuant KV schemes; and each of
// them written as an MLX-quantized folder (packed codes, scales and biases).
#include "engine/memory_contract.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/generator.h"
#include "engine/speculative.h"
#include "model/model.h"
#include "model/quantize_folder.h"
#include "quantized_fixture.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;
const fs::path kParityDir = fs::path(FATHOM_FIXTURES_DIR) / "parity";

using testing::parity_fixtures;

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::random_ids(n, vocab, rng);
}

struct Case {
  std::string fixture;
  ComputeDType dtype;
  int bits = 0;  // > 0: the fixture quantized to this many bits (groups of 32)
};

using testing::quantized_fixture;

class MemoryContractOnFixtures : public ::testing::TestWithParam<Case> {
 protected:
  std::string dir() const {
    const Case& c = GetParam();
    return c.bits ? quantized_fixture(c.fixture, c.bits) : (kParityDir / c.fixture).string();
  }
  MemoryContract contract(const KvScheme& scheme) const {
    return MemoryContract::for_model_dir(dir(), GetParam().dtype, scheme, ThreadPool::global().size());
  }
  std::unique_ptr<Model> load(const KvScheme& scheme) const {
    LoadOptions o;
    o.dtype = GetParam().dtype;
    o.kv_scheme = scheme;
    return load_model(dir(), o);
  }
};

// Weights: what the loader maps plus every tensor it allocates while loading
// (conversions, f32 norms and routers), exactly or a little over.
TEST_P(MemoryContractOnFixtures, WeightsAreWhatTheLoaderHolds) {
  const int64_t before = allocated_bytes(Device::cpu);
  auto model = load(KvScheme::bf16());
  const int64_t copies = allocated_bytes(Device::cpu) - before;
  const int64_t mapped = WeightStore::open_folder(dir()).total_bytes();
  const int64_t predicted = contract(KvScheme::bf16()).weights_bytes();
  EXPECT_GE(predicted, mapped + copies) << "mapped " << mapped << ", copies " << copies;
  // The contract bills an f32 copy of every norm weight (most architectures
  // map them); in a quantized tiny model those bytes are no longer negligible.
  int64_t norms = 0;
  if (GetParam().bits)
    for (const auto& [_, t] : read_safetensors_headers(dir())) norms += t.shape.size() == 1 ? t.shape[0] * 4 : 0;
  EXPECT_LE(predicted, (mapped + copies) + (mapped + copies) / 50 + norms)
      << "mapped " << mapped << ", copies " << copies;
}

// On a GPU the weights are what the loader uploads, each in an allocation of
// its own: f32 vectors, bf16 matrices in bf16 compute, the embedding table as
// stored and a tied head's own matmul copy (the GPU tests hold this to the
// device's counted bytes). Its working memory keeps no per-thread tiles.
TEST(MemoryContractOnAGpu, BillsTheDevicesForms) {
  const std::string dir = (kParityDir / "llama3_rope_tied_bf16").string();
  auto contract = [&](Device device, int threads) {
    return MemoryContract::for_model_dir(dir, ComputeDType::bf16, KvScheme::bf16(), threads, WeightResidence::mapped,
                                         device);
  };
  const MemoryContract gpu = contract(Device::cuda, 1);
  ASSERT_TRUE(gpu.config().tie_word_embeddings);
  auto aligned = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
  int64_t want = 0;
  for (const auto& [name, t] : read_safetensors_headers(dir)) {
    ASSERT_EQ(t.dtype, "BF16") << name;
    const int64_t n = int64_t(t.nbytes) / 2;
    if (t.shape.size() == 1) want += aligned(n * 4);
    else want += aligned(n * 2) * (name.find("embed_tokens") != std::string::npos ? 2 : 1);
  }
  EXPECT_EQ(gpu.weights_bytes(), want);
  EXPECT_EQ(gpu.transient_bytes(64, 300), contract(Device::cuda, 8).transient_bytes(64, 300));
  EXPECT_LT(contract(Device::cpu, 1).transient_bytes(64, 300), contract(Device::cpu, 8).transient_bytes(64, 300));
  EXPECT_GE(gpu.runtime_bytes(), (int64_t(48) << 20) + 3 * ((int64_t(8) << 20) + (int64_t(256) << 10)));
  EXPECT_EQ(gpu.kv_bytes(300, 64), contract(Device::cpu, 1).kv_bytes(300, 64));
  // A quantized copy goes up as stored: codes, scales and biases each in an
  // allocation of its own (the tied embedding's twice: table and head), norms in f32.
  const std::string quantized = quantized_fixture("llama3_rope_tied_bf16", 4);
  const MemoryContract q = MemoryContract::for_model_dir(quantized, ComputeDType::bf16, KvScheme::bf16(), 1,
                                                         WeightResidence::mapped, Device::cuda);
  int64_t want_quantized = 0, packed = 0;
  for (const auto& [name, t] : read_safetensors_headers(quantized)) {
    packed += t.dtype == "U32";
    if (t.shape.size() == 1) want_quantized += aligned(t.shape[0] * 4);
    else want_quantized += aligned(int64_t(t.nbytes)) * (name.find("embed_tokens") != std::string::npos ? 2 : 1);
  }
  EXPECT_GT(packed, 0);
  EXPECT_EQ(q.weights_bytes(), want_quantized);
  // Prefill chunks widen a panel of a quantized weight's rows; decode steps
  // do not, up to 16 rows for 4-bit codes in bf16 (the tensor-core GEMV).
  const auto growth = [](const MemoryContract& m, int64_t from, int64_t to) {
    return m.backend_scratch_bytes(to, 300) - m.backend_scratch_bytes(from, 300);
  };
  EXPECT_GT(growth(q, 4, 64), growth(gpu, 4, 64));
  EXPECT_EQ(growth(q, 1, 16), growth(gpu, 1, 16));
  EXPECT_GT(growth(q, 16, 17), growth(gpu, 16, 17));
}

// KV: the state's bytes after a sequence grows to its length, for schemes
// that quantize from the start and for plain storage.
TEST_P(MemoryContractOnFixtures, KvIsTheStatesBytes) {
  const ModelConfig config = load_model_config(dir());
  for (const KvScheme& scheme : {KvScheme::bf16(), KvScheme::affine_uniform(8, 32, 0), KvScheme::affine_uniform(4, 32, 0),
                                 KvScheme::turbo(3, 4, 0)}) {
    try {
      scheme.validate_for(config);
    } catch (const fathom::Error&) {
      continue;  // e.g. a head_dim the group or the rotation cannot take
    }
    auto model = load(scheme);
    const int64_t tokens = 37, chunk = 8;
    auto state = model->new_state(tokens);
    prefill(*model, *state, random_ids(tokens, model->config().vocab_size, 7), FixedPrefillPolicy(chunk), false);
    EXPECT_EQ(contract(scheme).kv_bytes(tokens, chunk), state->bytes()) << scheme.cache_key();
  }
}

// Transient: the most the step allocations (and the backend's scratch, which
// stays) ever reach above what the model and the state hold, over a whole
// chunked prefill, is what the contract bills for a chunk at that context —
// not less, and not much more.
TEST_P(MemoryContractOnFixtures, TransientBoundsTheStepsPeak) {
  const ModelConfig config = load_model_config(dir());
  for (const KvScheme& scheme : {KvScheme::bf16(), KvScheme::affine_uniform(8, 32, 0), KvScheme::turbo(3, 4, 0)}) {
    try {
      scheme.validate_for(config);
    } catch (const fathom::Error&) {
      continue;
    }
    for (const int64_t chunk : {1, 5, 16, 24}) {  // 24: past decode-like steps (bf16 attention tiles)
      auto model = load(scheme);
      const int64_t tokens = 41;
      auto state = model->new_state(tokens);
      const auto ids = random_ids(tokens, model->config().vocab_size, 11);
      const int64_t baseline = allocated_bytes(Device::cpu);
      reset_allocation_peak(Device::cpu);
      prefill(*model, *state, ids, FixedPrefillPolicy(chunk), false);
      const int64_t measured = allocated_peak_bytes(Device::cpu) - baseline;
      const int64_t predicted = contract(scheme).transient_bytes(chunk, tokens);
      EXPECT_GE(predicted, measured) << scheme.cache_key() << ", chunk " << chunk;
      EXPECT_LE(predicted, 2 * measured) << scheme.cache_key() << ", chunk " << chunk;
    }
  }
}

// An open speculative step: the state holds what the contract says a
// verify step of that many rows adds (a state after each position of the
// recurrent layers; nothing for KV, which holds its capacity already), and
// gives it back at resolve.
TEST_P(MemoryContractOnFixtures, AnOpenVerifyStepIsTheStatesBytes) {
  auto model = load(KvScheme::bf16());
  const MemoryContract c = contract(KvScheme::bf16());
  const int64_t tokens = 30, rows = 5;
  auto state = model->new_state(tokens);
  prefill(*model, *state, random_ids(12, model->config().vocab_size, 3), FixedPrefillPolicy(12), false);
  const int64_t before = state->bytes();
  state->begin(rows);
  model->forward(random_ids(rows, model->config().vocab_size, 4), *state, true);
  EXPECT_EQ(state->bytes() - before, c.recurrent_state_bytes(rows) - c.recurrent_state_bytes());
  state->resolve(2);
  EXPECT_EQ(state->bytes(), before);
}

// Speculation: a sampled speculative generation with a draft model (the
// fixture itself, catching up on a prompt longer than its chunk) allocates
// at its peak what the contract bills a sequence with speculation — not
// less, and not much more. KV caches reserve address space instead of
// allocating (Tensor::reserve), so their bytes (checked against the states
// in KvIsTheStatesBytes) are left out of both sides; recurrent states are
// allocated and stay in.
TEST_P(MemoryContractOnFixtures, SpeculationBoundsASpeculativeGeneration) {
  auto model = load(KvScheme::bf16());
  auto draft = load(KvScheme::bf16());
  MemoryContract c = contract(KvScheme::bf16());
  const auto d = std::make_shared<MemoryContract>(contract(KvScheme::bf16()));
  const int64_t k = 4, prompt = kDraftChunkTokens + 6, tokens = prompt + 16, chunk = 8;
  c.set_speculation(k, d);
  GenerationRequest request;
  request.prompt = random_ids(prompt, model->config().vocab_size, 5);
  request.max_new_tokens = tokens - prompt;
  request.sampling = {.temperature = 0.8f, .seed = 9};
  ModelDrafter drafter(*draft, tokens + k, 1.0);
  const int64_t baseline = allocated_bytes(Device::cpu);
  reset_allocation_peak(Device::cpu);
  const GenerationResult r =
      generate(*model, FixedPrefillPolicy(chunk), request, {}, Speculation{&drafter, k, /*adaptive=*/false});
  const int64_t measured = allocated_peak_bytes(Device::cpu) - baseline;
  EXPECT_GT(r.spec.drafted, 0);
  const int64_t reserved_kv = (c.kv_bytes(tokens, chunk) - c.recurrent_state_bytes()) +
                              (d->kv_bytes(tokens + k, kDraftChunkTokens) - d->recurrent_state_bytes());
  const int64_t predicted = c.kv_bytes(tokens, chunk) + c.transient_bytes(chunk, tokens) +
                            c.speculation_sequence_bytes(tokens, chunk) - reserved_kv;
  EXPECT_GE(predicted, measured);
  EXPECT_LE(predicted, 2 * measured);
  EXPECT_EQ(c.predict(tokens, 1, chunk).speculation,
            c.speculation_fixed_bytes() + c.speculation_sequence_bytes(tokens, chunk));
  EXPECT_EQ(c.speculation_fixed_bytes(), c.weights_bytes()) << "the draft is the same model";
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (const auto& f : parity_fixtures()) {
    for (ComputeDType d : {ComputeDType::f32, ComputeDType::bf16}) out.push_back({f, d});
    out.push_back({f, ComputeDType::bf16, 4});  // the packed GEMV and the pair kernel
    out.push_back({f, ComputeDType::f32, 3});   // widened panels
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MemoryContractOnFixtures, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) {
                           return info.param.fixture + "_" + compute_dtype_name(info.param.dtype) +
                                  (info.param.bits ? "_q" + std::to_string(info.param.bits) : "");
                         });

}  // namespace
}  // namespace fathom
