#pragma once
// The device memory the CUDA backend holds beside the tensors it is asked
// for, as constants the memory contract bills from (host code; no CUDA
// headers). Each is used where the backend allocates it.
#include <cstdint>

namespace fathom::cuda_memory {

// Every device allocation is rounded up to this.
inline constexpr int64_t kAllocationAlignment = 256;
// cuBLAS's workspace, ours: captured into a graph, cuBLAS must not allocate.
inline constexpr int64_t kCublasWorkspaceBytes = int64_t(32) << 20;
// A recorded step's arena chunk starts at these sizes (tensors, staged host
// data) and grows to 1.25× what the last step used (step_arena.cu).
inline constexpr int64_t kArenaTensorBytes = int64_t(8) << 20, kArenaStageBytes = int64_t(256) << 10;
// Attention's split partials hold at most this many (query row, head,
// split) triples, beyond one split per row; a split takes at least a tile
// of kMinSplitKeys keys.
inline constexpr int64_t kMaxPartialRows = int64_t(1) << 18, kMinSplitKeys = 32;

// Matmuls over quantized (MLX affine) weights: up to kAffineGemvMaxRows rows
// of x read the packed codes directly, and up to kAffineMmaGemvMaxRows for
// 4- and 8-bit codes in bf16 compute (on the tensor cores); longer steps
// widen the weight a panel of rows at a time into a scratch of at most
// kDequantPanelBytes (one row at least), 4 bytes a value (f32, or the two
// bf16 halves of it).
inline constexpr int64_t kAffineGemvMaxRows = 4, kAffineMmaGemvMaxRows = 16;
inline constexpr int64_t affine_gemv_max_rows(int bits, bool bf16_compute) {
  return bf16_compute && (bits == 4 || bits == 8) ? kAffineMmaGemvMaxRows : kAffineGemvMaxRows;
}
inline constexpr int64_t kDequantPanelBytes = int64_t(32) << 20;

// The panel an n × k weight is widened through.
inline constexpr int64_t dequant_panel_bytes(int64_t n, int64_t k) {
  const int64_t row = k * 4, rows = kDequantPanelBytes / row > 0 ? kDequantPanelBytes / row : 1;
  return (rows < n ? rows : n) * row;
}

inline constexpr int64_t aligned(int64_t bytes) {
  return (bytes + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
}

}  // namespace fathom::cuda_memory
