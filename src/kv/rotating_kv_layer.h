#pragma once
// The cache of a sliding-window attention layer: it holds only what the
// window can still reach. A query at position p sees p - window + 1 .. p, so
// before a step of at most `step` tokens the layer needs just the last
// window - 1 positions: storage is window - 1 + step rows, and when a step
// would not fit, the older rows are dropped (moved out in one memmove per
// head, about once every `step` tokens).
#include <cstdint>
#include <memory>

#include "io/model_config.h"
#include "kv/kv_layer.h"

namespace fathom {

// The longest step a sequence with sliding layers runs at once by default;
// longer steps are split (Model::forward), which is exact.
constexpr int64_t kSlidingStepTokens = 256;

// Rows of storage layer `layer` needs for a sequence of `capacity` tokens
// taken in steps of at most `step`.
int64_t kv_layer_rows(const ModelConfig& config, int64_t layer, int64_t capacity, int64_t step = kSlidingStepTokens);

// Wraps storage of window - 1 + step rows (or fewer when the sequence is
// shorter) into a layer of `capacity` positions.
std::unique_ptr<KvLayer> make_rotating_kv_layer(std::unique_ptr<KvLayer> storage, int64_t window, int64_t capacity);

}  // namespace fathom
