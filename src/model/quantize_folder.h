#pragma once
// `fathom quantize`: a Hugging Face folder (f32, bf16 or f16 weights) written
// once as an MLX-format folder that fathom and mlx-lm both load, a tensor at a
// time (memory holds one tensor, not the model): every Linear
// and Embedding weight whose rows split into whole groups becomes U32 codes
// with .scales and .biases (in the weight's own float dtype), config.json gets
// the "quantization" block (mirrored as "quantization_config"), MoE experts are
// stacked as MLX's switch layer, and the other files are copied as they are.
#include <cstdint>
#include <string>

namespace fathom {

struct QuantizeOptions {
  int bits = 4;
  int group_size = 64;
  // "" (every module at `bits`), or one of mlx-lm's mixed recipes:
  // mixed_2_6, mixed_3_4, mixed_3_5, mixed_3_6, mixed_3_8, mixed_4_6, mixed_4_8 —
  // low bits for most modules, high bits for the embeddings, the output head
  // and v_proj/down_proj of the first and last eighth of the layers and of
  // every third layer between (groups of 64).
  std::string mixed;
  // Shards of at most this many bytes (a tensor larger than that gets one of
  // its own), model-0000i-of-0000N.safetensors with an index; one shard is
  // model.safetensors. mlx-lm's default, 5 GB.
  int64_t max_shard_bytes = 5'000'000'000;
};

struct QuantizeReport {
  int64_t quantized_modules = 0;  // written as codes + scales + biases
  int64_t kept_modules = 0;       // matrices left as stored (rows not a whole number of groups)
  int64_t bytes_in = 0, bytes_out = 0;  // tensor data
};

// Throws fathom::Error naming the option or tensor for anything it cannot do
// (bits or group size outside the supported sets, an unknown recipe, an input
// that is already quantized, OUT the same folder as IN).
QuantizeReport quantize_folder(const std::string& in, const std::string& out, const QuantizeOptions& options);

}  // namespace fathom
