// The architecture registry: HF model_type → factory. An explicit table rather
// than self-registration, which static linking would silently drop.
#include <algorithm>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/model.h"

namespace fathom {
namespace {

struct Architecture {
  const char* model_type;
  ModelFactory factory;
};

const Architecture kArchitectures[] = {
    {"llama", make_llama_family},
    {"mistral", make_llama_family},
    {"qwen2", make_llama_family},
    {"qwen3", make_llama_family},
};

}  // namespace

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const auto& a : kArchitectures) out.push_back(a.model_type);
  return out;
}

std::unique_ptr<Model> load_model(const std::string& model_dir, const LoadOptions& options) {
  ModelConfig config = load_model_config(model_dir);
  for (const auto& a : kArchitectures)
    if (config.model_type == a.model_type) return a.factory(std::move(config), WeightStore::open_folder(model_dir), options);
  std::string list;
  for (const auto& t : supported_model_types()) list += (list.empty() ? "" : ", ") + t;
  fail("unsupported architecture: model_type \"", config.model_type, "\" (supported: ", list, ")");
}

int64_t SequenceState::bytes() const {
  int64_t total = 0;
  for (const auto& layer : kv) total += layer->bytes();
  return total;
}

void SequenceState::trim(int64_t new_length) {
  for (auto& layer : kv) layer->trim(new_length);
}

}  // namespace fathom
