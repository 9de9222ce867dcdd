#pragma once
// The state of one attention layer for one sequence. Models never touch cache
// storage: they append new keys/values and ask the layer to run attention over
// what it holds, so codecs and layouts can change behind this interface.
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "core/tensor.h"

namespace fathom {

class KvLayer {
 public:
  virtual ~KvLayer() = default;
  // Positions [first_position(), length()) are held.
  virtual int64_t length() const = 0;
  virtual int64_t first_position() const { return 0; }
  // Tokens the layer can hold: positions for a rotating layer, rows otherwise.
  virtual int64_t capacity() const = 0;
  // Stores k, v [count, kv_heads, head_dim] (f32) at positions [length, length + count).
  virtual void append(const Tensor& k, const Tensor& v) = 0;
  // Attention of q [count, heads, head_dim] at positions [first_position, …) over the held keys.
  virtual void attend(Backend& backend, const Tensor& q, const AttentionParams& p, Tensor& out) const = 0;
  // Forgets positions >= new_length (0 empties the layer).
  virtual void trim(int64_t new_length) = 0;
  // Forgets the oldest `count` rows held; the others keep their positions.
  virtual void drop_front(int64_t count) = 0;
  // Called after every prefill chunk and decode step; a layer with a delayed
  // quantization start converts here once it holds enough tokens.
  virtual void end_step() {}
  // The length at which a delayed quantization start will convert this layer
  // (at the end of the step that reaches it); INT64_MAX when none is pending.
  virtual int64_t conversion_at() const { return INT64_MAX; }
  // Bytes of storage this layer holds.
  virtual int64_t bytes() const = 0;
  // What attention reads (for a rotated codec, rows are in the rotated space).
  virtual KvView view() const = 0;
};

// Plain storage in f32 or bf16, [kv_heads, capacity, head_dim] for K and V,
// reserved once at the sequence's capacity and committed as rows arrive.
class PlainKvLayer final : public KvLayer {
 public:
  PlainKvLayer(int64_t kv_heads, int64_t head_dim, int64_t capacity, DType dtype);
  int64_t length() const override { return first_ + rows_; }
  int64_t first_position() const override { return first_; }
  int64_t capacity() const override { return capacity_; }
  void append(const Tensor& k, const Tensor& v) override;
  void attend(Backend& backend, const Tensor& q, const AttentionParams& p, Tensor& out) const override;
  void trim(int64_t new_length) override;
  void drop_front(int64_t count) override;
  int64_t bytes() const override { return int64_t(k_.nbytes() + v_.nbytes()); }
  KvView view() const override;

 private:
  void store(const float* src, Tensor& dst, int64_t offset);

  int64_t kv_heads_, head_dim_, capacity_;
  DType dtype_;
  int64_t first_ = 0;  // position of row 0
  int64_t rows_ = 0;
  Tensor k_, v_;
};

// For storage laid out [heads, capacity, …] (any per-row size): moves rows
// [count, rows) of every head to the front. What drop_front does to memory.
void shift_rows_to_front(Tensor& t, int64_t heads, int64_t capacity, int64_t rows, int64_t count);

std::unique_ptr<KvLayer> make_plain_kv_layer(int64_t kv_heads, int64_t head_dim, int64_t capacity, DType dtype);

struct LayerCodec;
// A layer stored with a quantized codec (affine or TurboQuant). Until it holds
// `start` tokens (and at least one) it keeps plain storage of `plain_dtype` and
// attends exactly; at the first step boundary past that it converts.
// `rotation_seed` fixes TurboQuant's random rotation for this layer.
std::unique_ptr<KvLayer> make_codec_kv_layer(int64_t kv_heads, int64_t head_dim, int64_t capacity,
                                             const LayerCodec& codec, int64_t start, DType plain_dtype,
                                             uint64_t rotation_seed);

}  // namespace fathom
