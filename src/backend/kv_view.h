#pragma once
// A layer's cached keys and values, described as data so that every
// backend's attention kernel can read them in place: fixed-size blocks from a
// pool (a block table per layer), each holding `block_rows` consecutive rows
// of every kv head, stored plain (f32/bf16) or coded (affine or codebook
// codes with their per-row parameters). Nothing is widened into a copy.
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace fathom {

// How one layer's rows sit in a block. In order, each region 64-byte aligned:
// K rows [kv_heads, block_rows, k_row_bytes], V rows likewise, then for coded
// formats the per-row parameters of K and V: affine scales and biases (bf16,
// [kv_heads, block_rows, groups] each), or codebook row scales (f32,
// [kv_heads, block_rows]).
struct KvFormat {
  enum class Codec { plain, affine, codebook };
  Codec codec = Codec::plain;
  DType dtype = DType::f32;  // plain rows: f32 or bf16
  int k_bits = 0, v_bits = 0;  // coded rows: bits per value
  int group_size = 0;          // affine: values per scale/bias pair along head_dim
  int64_t kv_heads = 0, head_dim = 0;
  int64_t block_rows = 0;

  // Bytes of one row of one head: elements, or packed 32-bit code words.
  int64_t row_bytes(bool values) const;
  // 32-bit words of one coded row.
  int64_t code_words(bool values) const { return row_bytes(values) / 4; }
  int64_t groups() const { return group_size > 0 ? head_dim / group_size : 0; }
  // Where head h's first row (or its parameters) starts in a block.
  int64_t rows_offset(bool values, int64_t head) const;
  int64_t scales_offset(bool values, int64_t head) const;  // affine scales or codebook row scales
  int64_t biases_offset(bool values, int64_t head) const;  // affine only
  // Bytes a block of this format fills (at most the pool's block size).
  int64_t bytes() const;
  // Bytes one token takes in every head, K and V, parameters included (no alignment).
  int64_t token_bytes() const;
  // The format with the most rows (at least 1) whose blocks fit `block_bytes`.
  KvFormat fitted_to(int64_t block_bytes) const;
  bool operator==(const KvFormat&) const = default;
};

struct KvView {
  KvFormat format;
  std::byte* const* blocks = nullptr;  // the block table (kv_write writes through it)
  // View row j lives at row (row_offset + j) of the table's rows: block
  // (row_offset + j) / block_rows. A sliding window advances row_offset as it
  // frees the blocks it has passed.
  int64_t row_offset = 0;
  int64_t length = 0;  // rows
  int64_t first_position = 0;  // position of view row 0
  // Codebook formats: value = row scale · table[code] (tables of 2^bits entries).
  std::array<float, 16> k_table{}, v_table{};
  // Codebook formats: rows are stored rotated by the randomized Hadamard
  // transform this seed fixes (HadamardRotation).
  uint64_t rotation_seed = 0;

  int64_t end_position() const { return first_position + length; }
  int64_t kv_heads() const { return format.kv_heads; }
  int64_t head_dim() const { return format.head_dim; }
  // The block holding view row j, and j's row inside it.
  std::byte* block_of(int64_t j) const { return blocks[(row_offset + j) / format.block_rows]; }
  int64_t row_in_block(int64_t j) const { return (row_offset + j) % format.block_rows; }
};

}  // namespace fathom
