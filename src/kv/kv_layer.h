#pragma once
// The state of one attention layer for one sequence. Models never touch cache
// storage: they claim rows for new keys/values and read the layer through its
// view (what the backend's kv_write and attention take), so codecs and
// layouts can change behind this interface.
#include <cstdint>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "core/tensor.h"
#include "kv/block_pool.h"

namespace fathom {

class KvLayer {
 public:
  virtual ~KvLayer() = default;
  // Positions [first_position(), length()) are held.
  virtual int64_t length() const = 0;
  virtual int64_t first_position() const = 0;
  // Tokens the layer may hold (the sequence's capacity).
  virtual int64_t capacity() const = 0;
  // Makes room for positions [length, length + count) and holds them from
  // now on; the caller writes their rows (Backend::kv_write over view())
  // before anything reads them. A step claims every sequence's rows first,
  // so that one write and one attention serve all of them.
  virtual void claim(int64_t count) = 0;
  // Stores k, v [count, kv_heads, head_dim] (f32) at positions [length, length + count).
  virtual void append(const Tensor& k, const Tensor& v) = 0;
  // Forgets positions >= new_length (0 empties the layer).
  virtual void trim(int64_t new_length) = 0;
  // Called after every prefill chunk and decode step; a layer with a delayed
  // quantization start converts here once it holds enough tokens.
  virtual void end_step() {}
  // The length at which a delayed quantization start will convert this layer
  // (at the end of the step that reaches it); INT64_MAX when none is pending.
  virtual int64_t conversion_at() const { return INT64_MAX; }
  // Bytes of the blocks this layer holds.
  virtual int64_t bytes() const = 0;
  // What attention reads (for a rotated codec, rows are in the rotated space).
  virtual KvView view() const = 0;
  // The same rows for a sequence of `capacity` tokens, sharing this layer's
  // blocks: whichever writes into a shared block first copies it.
  virtual std::unique_ptr<KvLayer> fork(int64_t capacity) const = 0;
};

// What one attention layer stores and how much of it.
struct KvLayerSpec {
  KvFormat plain;                 // rows before the quantization start (and always, without a codec)
  std::optional<KvFormat> coded;  // rows from the start on
  int64_t start = 0;              // tokens held before converting to `coded` (0: coded from the first row)
  int64_t capacity = 0;           // tokens of the sequence
  std::optional<int64_t> window;  // sliding-window layers
  int64_t step = 1;               // longest step the sequence runs (sliding layers keep window - 1 + step rows)
  uint64_t rotation_seed = 0;     // codebook formats: fixes the random rotation
};

std::unique_ptr<KvLayer> make_kv_layer(std::shared_ptr<KvBlockPool> pool, const KvLayerSpec& spec);

}  // namespace fathom
