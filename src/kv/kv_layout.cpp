#include "kv/kv_layout.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

int64_t kv_block_bytes(const ModelConfig& config, DType plain_dtype) {
  int64_t widest = 0;
  for (int64_t i = 0; i < config.num_layers; ++i)
    if (config.owns_kv(i) && config.layer_types[size_t(i)] != LayerKind::linear_attention)
      widest = std::max(widest, 2 * config.kv_heads_of(i) * config.head_dim_of(i));
  const int64_t bytes = kKvBlockTokens * std::max<int64_t>(widest, 1) * int64_t(dtype_size(plain_dtype));
  return (bytes + 63) / 64 * 64;
}

int64_t kv_max_blocks(int64_t block_rows, int64_t capacity, std::optional<int64_t> window, int64_t step) {
  check(block_rows > 0 && capacity > 0 && step > 0, "kv blocks: ", block_rows, " rows a block, capacity ", capacity,
        ", step ", step);
  const int64_t all = (capacity + block_rows - 1) / block_rows;
  if (!window) return all;
  // Rows [p - window + 1, …) must stay for a step starting at p, whose rows
  // come after them; the oldest block may be partly passed.
  const int64_t ring = (*window - 1 + step + block_rows - 1) / block_rows + 1;
  return std::min(all, ring);
}

int64_t kv_blocks_at(int64_t tokens, int64_t block_rows, int64_t max_blocks) {
  return std::min((tokens + block_rows - 1) / block_rows, max_blocks);
}

}  // namespace fathom
