// The AMX-BF16 build of the prefill matmul (compiled with -mamx-tile
// -mamx-bf16 and AVX-512): the tile instructions as amx_matmul.inc's policy.
// Chosen at run time only where amx_bf16_available() (simd_dispatch.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/kernels.h"
#include "backend/cpu/pack_pairs_avx512.h"

namespace fathom::cpu {
namespace {

// The 64-byte operand of ldtilecfg (palette 1): every tile 16 rows × 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

struct AmxTiles {
  static void configure() {
    TileConfig config;
    for (int t = 0; t < 8; ++t) {
      config.bytes_per_row[t] = 64;
      config.rows[t] = 16;
    }
    _tile_loadconfig(&config);
  }
  // Tile state is per thread and large: give it back after each slice so a
  // context switch does not save it.
  static void release() { _tile_release(); }
  // GCC's tile intrinsics paste their tile numbers into the assembly as
  // written, so each number is spelled out.
  template <int t>
  static void load(const void* p, int64_t stride) {
#define FATHOM_TILE_LOAD(n) \
  if constexpr (t == n) _tile_loadd(n, p, stride);
    FATHOM_TILE_LOAD(0) FATHOM_TILE_LOAD(1) FATHOM_TILE_LOAD(2) FATHOM_TILE_LOAD(3)
    FATHOM_TILE_LOAD(4) FATHOM_TILE_LOAD(5) FATHOM_TILE_LOAD(6) FATHOM_TILE_LOAD(7)
#undef FATHOM_TILE_LOAD
  }
  template <int t>
  static void store(void* p, int64_t stride) {
    if constexpr (t == 0) _tile_stored(0, p, stride);
    if constexpr (t == 1) _tile_stored(1, p, stride);
    if constexpr (t == 2) _tile_stored(2, p, stride);
    if constexpr (t == 3) _tile_stored(3, p, stride);
  }
  // The C tiles are 0–3 (row block i, column block j: 2i + j), A 4–5, B 6–7.
  template <int c, int a, int b>
  static void dot() {
    static_assert(a == 4 + c / 2 && b == 6 + c % 2, "C tile 2i + j takes A tile 4 + i and B tile 6 + j");
    if constexpr (c == 0) _tile_dpbf16ps(0, 4, 6);
    if constexpr (c == 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (c == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (c == 3) _tile_dpbf16ps(3, 5, 7);
  }
};

}  // namespace

#include "backend/cpu/amx_matmul.inc"
#include "backend/cpu/amx_quant_gemm.inc"

void matmul_slice_amx(const MatmulArgs& a, int64_t n0, int64_t n1) { amx_matmul<AmxTiles>(a, n0, n1); }

void quant_gemm_amx(const QuantMatmulArgs& a, const bf16_t* xb, int64_t n0, int64_t n1, void* scratch) {
  amx_quant_gemm<AmxTiles>(a, xb, n0, n1, scratch);
}

void gemm_pv_amx(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n, int64_t d,
                 float* y, int64_t ldy, bf16_t* panel) {
  amx_gemm_pv<AmxTiles>(p, ldp, v, ldv, M, n, d, y, ldy, panel);
}

void gemm_qk_amx(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk, int64_t n,
                 float* s, int64_t lds) {
  amx_gemm_qk<AmxTiles>(q, ldq, rows, d, k, ldk, n, s, lds);
}

}  // namespace fathom::cpu
