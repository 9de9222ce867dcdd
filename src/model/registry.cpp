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

void SequenceState::end_step() {
  for (auto& layer : kv) layer->end_step();  // one layer at a time keeps the conversion peak low
}

int64_t Model::kv_bytes_at(int64_t tokens) const {
  return kv_scheme_.bytes_at(config(), tokens, int64_t(dtype_size(plain_kv_dtype())));
}

std::unique_ptr<SequenceState> Model::make_state(const ModelConfig& config, int64_t capacity) const {
  auto state = std::make_unique<SequenceState>();
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const LayerCodec codec = kv_scheme_.codec_for_layer(config, i);
    if (codec.kind == LayerCodec::Kind::plain)
      state->kv.push_back(make_plain_kv_layer(config.num_kv_heads, config.head_dim, capacity, plain_kv_dtype()));
    else
      state->kv.push_back(make_codec_kv_layer(config.num_kv_heads, config.head_dim, capacity, codec,
                                              kv_scheme_.quantized_kv_start(), plain_kv_dtype(),
                                              0x7e4b0u + uint64_t(i)));
  }
  return state;
}

}  // namespace fathom
