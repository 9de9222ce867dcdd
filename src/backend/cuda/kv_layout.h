#pragma once
// A KV view's format flattened for kernels, and where a row of it lies in
// its paged blocks. Device code: for .cu files only.
#include <cstdint>

#include <cuda_runtime.h>

#include "backend/kv_view.h"
#include "backend/turbo_codec.h"

namespace fathom::cuda {

// A KvFormat flattened for kernels: every offset precomputed on the host.
struct KvLayout {
  int codec = 0;  // 0 plain, 1 affine, 2 codebook
  bool bf16 = false;
  int bits[2] = {0, 0};          // K, V
  int group = 0, groups = 0;
  int64_t head_dim = 0, block_rows = 0;
  int64_t row_bytes[2] = {0, 0};
  int64_t rows_base[2] = {0, 0};    // head 0's rows
  int64_t scales_base[2] = {0, 0};  // head 0's scales (affine) or row scales (codebook)
  int64_t biases_base[2] = {0, 0};
  int64_t param_bytes = 0;          // per row in each parameter region
  int64_t row_offset = 0, first_position = 0, length = 0;
  float table[2][16] = {};
  float boundaries[2][15] = {};
};

inline KvLayout layout_of(const KvView& kv) {
  const KvFormat& f = kv.format;
  KvLayout l;
  l.codec = f.codec == KvFormat::Codec::plain ? 0 : f.codec == KvFormat::Codec::affine ? 1 : 2;
  l.bf16 = f.dtype == DType::bf16;
  l.bits[0] = f.k_bits;
  l.bits[1] = f.v_bits;
  l.group = f.group_size;
  l.groups = int(f.groups());
  l.head_dim = f.head_dim;
  l.block_rows = f.block_rows;
  for (int v = 0; v < 2; ++v) {
    l.row_bytes[v] = f.row_bytes(v);
    l.rows_base[v] = f.rows_offset(v, 0);
    if (f.codec != KvFormat::Codec::plain) l.scales_base[v] = f.scales_offset(v, 0);
    if (f.codec == KvFormat::Codec::affine) l.biases_base[v] = f.biases_offset(v, 0);
  }
  l.param_bytes = f.codec == KvFormat::Codec::affine ? f.groups() * 2 : f.codec == KvFormat::Codec::codebook ? 4 : 0;
  l.row_offset = kv.row_offset;
  l.first_position = kv.first_position;
  l.length = kv.length;
  for (int i = 0; i < 16; ++i) {
    l.table[0][i] = kv.k_table[size_t(i)];
    l.table[1][i] = kv.v_table[size_t(i)];
  }
  if (f.codec == KvFormat::Codec::codebook)
    for (int v = 0; v < 2; ++v) {
      const auto& book = lloyd_max_codebook(v ? f.v_bits : f.k_bits);
      for (size_t i = 0; i < book.boundaries.size(); ++i) l.boundaries[v][i] = book.boundaries[i];
    }
  return l;
}

struct RowRef {
  unsigned char* block;
  int64_t r;  // row inside the block
};

__device__ __forceinline__ RowRef row_ref(const KvLayout& l, unsigned char* const* table, int64_t j) {
  const int64_t at = l.row_offset + j;
  return {table[at / l.block_rows], at % l.block_rows};
}

// Where one row of a step belongs, for the kernels that take every sequence
// of a step in one launch (staged by CudaBackend::stage_rows): its
// sequence's block table and view (KvView's row_offset, first_position) and
// the row's position.
struct KvRowRef {
  unsigned char* const* table;
  int64_t row_offset, first_position, position;
};

// View row j of the sequence `s` refers to (the layout gives the format only).
__device__ __forceinline__ RowRef row_ref(const KvLayout& l, const KvRowRef& s, int64_t j) {
  const int64_t at = s.row_offset + j;
  return {s.table[at / l.block_rows], at % l.block_rows};
}

__device__ __forceinline__ unsigned char* row_ptr(const KvLayout& l, RowRef ref, int v, int64_t h) {
  return ref.block + l.rows_base[v] + (h * l.block_rows + ref.r) * l.row_bytes[v];
}

}  // namespace fathom::cuda
