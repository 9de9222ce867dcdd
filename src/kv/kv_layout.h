#pragma once
// How a model's attention layers take blocks from its pool: the pool's block
// size, and how many blocks a layer holds at a given length. The layers and
// the memory contract both use these, so what is predicted is what is held.
#include <cstdint>
#include <optional>

#include "backend/kv_view.h"
#include "io/model_config.h"

namespace fathom {

// Tokens a block holds for the model's widest plain layer; narrower and
// coded layers fit more into the same bytes.
constexpr int64_t kKvBlockTokens = 32;
// The longest step a sequence with sliding layers runs at once by default;
// longer steps are split (Model::forward), which is exact.
constexpr int64_t kSlidingStepTokens = 256;

// Rows a delayed quantization start widens and converts at a time (bounds its buffer).
constexpr int64_t kKvConvertRows = 64;

// Bytes of every block of a model's pool: kKvBlockTokens tokens of its widest
// attention layer stored plain in `plain_dtype`.
int64_t kv_block_bytes(const ModelConfig& config, DType plain_dtype);

// Most blocks one layer holds for a sequence of `capacity` tokens. A sliding
// layer only needs the last window - 1 positions before a step of at most
// `step` tokens: once it holds enough blocks for those rows, the step's rows
// and one partly passed block, it reuses its oldest block instead of taking
// another. 0 means no limit but the capacity.
int64_t kv_max_blocks(int64_t block_rows, int64_t capacity, std::optional<int64_t> window, int64_t step);
// Blocks a layer holds once it has stored `tokens` rows from position 0.
int64_t kv_blocks_at(int64_t tokens, int64_t block_rows, int64_t max_blocks);

}  // namespace fathom
