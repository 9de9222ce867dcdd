#pragma once
// One factory per architecture family; registry.cpp maps model_type to these.
#include <memory>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/model.h"

namespace fathom {

using ModelFactory = std::unique_ptr<Model> (*)(ModelConfig config, WeightStore weights, const LoadOptions& options);

// Llama, Mistral, Qwen2 and Qwen3: pre-norm decoders with GQA, RoPE and SwiGLU.
std::unique_ptr<Model> make_llama_family(ModelConfig config, WeightStore weights, const LoadOptions& options);
// Qwen3-MoE: Qwen3 attention with sparse top-k MoE MLPs.
// Gemma 3 text: (1 + w) pre/post norms, GELU-tanh MLP, local/global RoPE.
std::unique_ptr<Model> make_gemma3(ModelConfig config, WeightStore weights, const LoadOptions& options);
std::unique_ptr<Model> make_qwen3_moe(ModelConfig config, WeightStore weights, const LoadOptions& options);

}  // namespace fathom
