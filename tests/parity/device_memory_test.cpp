// The memory contract on a GPU: every fixture model loaded with --device cuda
// holds on the device exactly the weights the contract predicts from the
// headers, and prefill chunks, decode steps (recorded and replayed) and
// several sequences at once never take more device memory than the contract
// bills for them; each fixture again with its weights quantized to 4 bits
// (MLX format). Where no GPU is usable every case says it is skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "backend/cuda/device_memory.h"
#include "engine/memory_contract.h"
#include "model/model.h"
#include "quantized_fixture.h"
#include "test_util.h"

namespace fathom {
namespace {

struct MemoryCase {
  std::string fixture;
  ComputeDType dtype;
  int bits = 0;  // > 0: the fixture's weights quantized to this many bits
};

std::vector<MemoryCase> memory_cases() {
  std::vector<MemoryCase> cases;
  for (const std::string& fixture : testing::parity_fixtures())
    for (ComputeDType dtype : {ComputeDType::f32, ComputeDType::bf16})
      for (int bits : {0, 4}) cases.push_back({fixture, dtype, bits});
  return cases;
}

class DeviceMemory : public ::testing::TestWithParam<MemoryCase> {
 protected:
  void SetUp() override {
    try {
      gpu_free_bytes("cuda");
    } catch (const Error& e) {
      GTEST_SKIP() << "skipped: no cuda device: " << e.what();
    }
  }
  std::string dir() const {
    const MemoryCase& c = GetParam();
    return c.bits ? testing::quantized_fixture(c.fixture, c.bits)
                  : (std::filesystem::path(FATHOM_FIXTURES_DIR) / "parity" / c.fixture).string();
  }
  // Device bytes this process holds now: tensors and KV slabs.
  static int64_t held() { return allocated_bytes(Device::cuda) + reserved_bytes(Device::cuda); }
};

TEST_P(DeviceMemory, WeightsAndStepsStayWithinTheContract) {
  auto rng = testing::fresh_rng();
  const KvScheme scheme = KvScheme::bf16();
  const MemoryContract contract = MemoryContract::for_model_dir(dir(), GetParam().dtype, scheme, 1,
                                                                WeightResidence::mapped, Device::cuda);
  const int64_t before = held(), free_before = gpu_free_bytes("cuda");
  LoadOptions o;
  o.dtype = GetParam().dtype;
  o.kv_scheme = scheme;
  o.device = "cuda";
  auto model = load_model(dir(), o);
  // Loaded: the weights as predicted, and the backend's cuBLAS workspace.
  const int64_t loaded = held() - before;
  EXPECT_EQ(loaded, contract.weights_bytes() + cuda_memory::kCublasWorkspaceBytes)
      << "weights predicted " << contract.weights_bytes();

  // Three sequences prefilled in chunks of 48, then decoding together.
  const int64_t context = 200, chunk = 48, sequences = 3;
  const int64_t vocab = model->config().vocab_size;
  reset_allocation_peak(Device::cuda);
  int64_t peak = held();
  std::vector<std::unique_ptr<SequenceState>> states;
  std::vector<int32_t> last;
  for (int64_t s = 0; s < sequences; ++s) {
    states.push_back(model->new_state(context));
    const auto ids = testing::random_ids(150 + 10 * s, vocab, rng);
    Tensor logits;
    for (size_t at = 0; at < ids.size(); at += size_t(chunk)) {
      const std::vector<int32_t> part(ids.begin() + at, ids.begin() + std::min(ids.size(), at + size_t(chunk)));
      logits = model->forward(part, *states.back(), false);
      peak = std::max(peak, allocated_peak_bytes(Device::cuda) + reserved_bytes(Device::cuda));
    }
    last.push_back(int32_t(std::max_element(logits.data<float>(), logits.data<float>() + vocab) - logits.data<float>()));
  }
  for (int step = 0; step < 30; ++step) {
    std::vector<SequenceStep> batch;
    for (int64_t s = 0; s < sequences; ++s) batch.push_back({states[size_t(s)].get(), {last[size_t(s)]}, WantLogits::pick});
    const Tensor picks = model->forward(batch).picks;  // greedy, as the engine decodes
    for (int64_t s = 0; s < sequences; ++s) last[size_t(s)] = picks.data<int32_t>()[s];
    peak = std::max(peak, allocated_peak_bytes(Device::cuda) + reserved_bytes(Device::cuda));
  }
  const MemoryBreakdown b = contract.predict(context, sequences, chunk);
  EXPECT_LE(peak - before, b.total()) << "weights " << b.weights << ", kv " << b.kv << ", transient " << b.transient
                                      << ", runtime " << b.runtime;
  // What the driver says the process took, pool and context growth included
  // (for the record: the pool's segments are coarser than our allocations).
  std::printf("[ device memory ] %s: held %lld, contract %lld, free memory dropped by %lld\n",
              GetParam().fixture.c_str(), (long long)(peak - before), (long long)b.total(),
              (long long)(free_before - gpu_free_bytes("cuda")));
}

std::string case_name(const ::testing::TestParamInfo<MemoryCase>& info) {
  std::string name = info.param.fixture + "_" + (info.param.dtype == ComputeDType::f32 ? "f32" : "bf16") +
                     (info.param.bits ? "_q" + std::to_string(info.param.bits) : "");
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeviceMemory, ::testing::ValuesIn(memory_cases()), case_name);

}  // namespace
}  // namespace fathom
