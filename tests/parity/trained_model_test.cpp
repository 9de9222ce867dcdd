// The trained models that ship in assets/models against transformers' f32
// logits and greedy continuation on a chat prompt (tests/fixtures/trained,
// written by scripts/train/train.py on the GPU machine).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "test_util.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;

class TrainedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainedModel, MatchesTransformers) {
  const fs::path ref_dir = fs::path(FATHOM_FIXTURES_DIR) / "trained" / GetParam();
  const fs::path model_dir = fs::path(FATHOM_FIXTURES_DIR) / ".." / ".." / "assets" / "models" / GetParam();
  std::ifstream in(ref_dir / "reference.json");
  nlohmann::json ref;
  in >> ref;
  const auto prompt = ref.at("prompt_ids").get<std::vector<int32_t>>();
  const auto greedy = ref.at("greedy_ids").get<std::vector<int32_t>>();
  const WeightStore store = WeightStore::open_file((ref_dir / "reference.safetensors").string());
  const Tensor expected = store.get("logits");

  LoadOptions options;
  options.dtype = ComputeDType::f32;
  auto model = load_model(model_dir.string(), options);
  auto state = model->new_state(int64_t(prompt.size()));
  const Tensor logits = prefill(*model, *state, prompt, FixedPrefillPolicy(5), true);
  const int64_t vocab = expected.dim(1);
  for (int64_t t = 0; t < int64_t(prompt.size()); ++t)
    EXPECT_LE(testing::relative_error(logits.data<float>() + t * vocab, expected.data<float>() + t * vocab, vocab),
              1e-4)
        << "position " << t;

  GenerationRequest request;
  request.prompt = prompt;
  request.max_new_tokens = int64_t(greedy.size());
  request.sampling.temperature = 0.0f;
  EXPECT_EQ(generate(*model, FixedPrefillPolicy(), request).ids, greedy);
}

INSTANTIATE_TEST_SUITE_P(Assets, TrainedModel, ::testing::Values("fathom-chat-small", "fathom-draft"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace fathom
