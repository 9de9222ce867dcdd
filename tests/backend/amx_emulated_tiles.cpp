// amx_matmul.inc over a plain emulation of the tile instructions, for tests:
// it checks the AMX kernel's blocking, packing and strides on any processor
// with AVX-512; only the real instructions need an AMX machine.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/pack_pairs_avx512.h"

namespace fathom::cpu {
namespace {

struct EmulatedTiles {
  static inline thread_local uint8_t tiles[8][16][64];
  static void configure() {}
  static void release() {}
  template <int t>
  static void load(const void* p, int64_t stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(tiles[t][r], static_cast<const uint8_t*>(p) + r * stride, 64);
  }
  template <int t>
  static void store(void* p, int64_t stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(static_cast<uint8_t*>(p) + r * stride, tiles[t][r], 64);
  }
  // C[m][n] += Σ_p A[m][2p]·B[p][2n] + A[m][2p+1]·B[p][2n+1], as tdpbf16ps.
  template <int c, int a, int b>
  static void dot() {
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        float acc;
        std::memcpy(&acc, &tiles[c][m][4 * n], 4);
        for (int p = 0; p < 16; ++p)
          for (int t = 0; t < 2; ++t) {
            bf16_t x, w;
            std::memcpy(&x, &tiles[a][m][2 * (2 * p + t)], 2);
            std::memcpy(&w, &tiles[b][p][2 * (2 * n + t)], 2);
            acc += bf16_to_f32(x) * bf16_to_f32(w);
          }
        std::memcpy(&tiles[c][m][4 * n], &acc, 4);
      }
  }
};

}  // namespace

#include "backend/cpu/amx_matmul.inc"
#include "backend/cpu/amx_quant_gemm.inc"

// Declared in the tests that use them (matmul, attention, quantized matmul).
void matmul_slice_amx_emulated(const MatmulArgs& a, int64_t n0, int64_t n1) {
  amx_matmul<EmulatedTiles>(a, n0, n1);
}

void quant_gemm_amx_emulated(const QuantMatmulArgs& a, const bf16_t* xb, int64_t n0, int64_t n1, void* scratch) {
  amx_quant_gemm<EmulatedTiles>(a, xb, n0, n1, scratch);
}

void gemm_pv_amx_emulated(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n,
                          int64_t d, float* y, int64_t ldy, bf16_t* panel) {
  amx_gemm_pv<EmulatedTiles>(p, ldp, v, ldv, M, n, d, y, ldy, panel);
}

void gemm_qk_amx_emulated(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk,
                          int64_t n, float* s, int64_t lds) {
  amx_gemm_qk<EmulatedTiles>(q, ldq, rows, d, k, ldk, n, s, lds);
}

}  // namespace fathom::cpu
