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
  virtual int64_t length() const = 0;
  virtual int64_t capacity() const = 0;
  // Stores k, v [count, kv_heads, head_dim] (f32) at positions [length, length + count).
  virtual void append(const Tensor& k, const Tensor& v) = 0;
  // Attention of q [count, heads, head_dim] at positions [first_position, …) over the held keys.
  virtual void attend(Backend& backend, const Tensor& q, const AttentionParams& p, Tensor& out) const = 0;
  // Forgets positions >= new_length.
  virtual void trim(int64_t new_length) = 0;
  // Bytes of storage this layer holds.
  virtual int64_t bytes() const = 0;
};

// Plain storage in f32 or bf16, [kv_heads, capacity, head_dim] for K and V,
// allocated once at the sequence's capacity.
std::unique_ptr<KvLayer> make_plain_kv_layer(int64_t kv_heads, int64_t head_dim, int64_t capacity, DType dtype);

}  // namespace fathom
