#pragma once
// One factory per architecture family; registry.cpp maps model_type to these.
#include <memory>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/model.h"

namespace fathom {

using ModelFactory = std::unique_ptr<Model> (*)(ModelConfig config, WeightStore weights, const LoadOptions& options);

// Llama, Mistral, Qwen2, Qwen3 and Qwen3-MoE: pre-norm decoders with GQA, RoPE
// and SwiGLU (or sparse top-k SwiGLU experts).
std::unique_ptr<Model> make_llama_family(ModelConfig config, WeightStore weights, const LoadOptions& options);
// Gemma 3 text: (1 + w) pre/post norms, GELU-tanh MLP, local/global RoPE.
std::unique_ptr<Model> make_gemma3(ModelConfig config, WeightStore weights, const LoadOptions& options);
// Gemma 4 text: Gemma 3's layout plus per-layer head dims, KV sharing,
// per-layer inputs, attention_k_eq_v and an optional MoE block.
std::unique_ptr<Model> make_gemma4(ModelConfig config, WeightStore weights, const LoadOptions& options);
// Qwen3-Next and Qwen3.5: Gated DeltaNet linear-attention layers between gated
// full-attention layers; dense or MoE (with a shared expert) MLPs.
std::unique_ptr<Model> make_qwen3_next(ModelConfig config, WeightStore weights, const LoadOptions& options);

}  // namespace fathom
