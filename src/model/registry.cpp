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
    {"qwen3_moe", make_llama_family},
    {"gemma3_text", make_gemma3},
    {"gemma3", make_gemma3},
    {"gemma4_text", make_gemma4},
    {"qwen3_next", make_qwen3_next},
    {"qwen3_5_text", make_qwen3_next},
};

}  // namespace

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const auto& a : kArchitectures) out.push_back(a.model_type);
  return out;
}

void require_supported_model_type(const std::string& model_type) {
  for (const auto& a : kArchitectures)
    if (model_type == a.model_type) return;
  std::string list;
  for (const auto& t : supported_model_types()) list += (list.empty() ? "" : ", ") + t;
  fail("unsupported architecture: model_type \"", model_type, "\" (supported: ", list, ")");
}

std::unique_ptr<Model> load_model(const std::string& model_dir, const LoadOptions& options) {
  ModelConfig config = load_model_config(model_dir);
  require_supported_model_type(config.model_type);
  for (const auto& a : kArchitectures)
    if (config.model_type == a.model_type)
      return a.factory(std::move(config), WeightStore::open_folder(model_dir, options.weight_residence), options);
  return nullptr;  // unreachable: require_supported_model_type threw
}

}  // namespace fathom
