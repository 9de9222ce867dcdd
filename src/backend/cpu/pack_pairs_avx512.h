#pragma once
// Packings into "pairs" order, two consecutive k of one column side by side,
// as the AVX-512 pair kernel and the AMX tiles multiply them: w [N, K] rows
// transposed (matmuls), and v [K, N] rows interleaved (attention's P·V).
// Include only from translation units compiled with AVX-512 (BW) enabled.
#include <immintrin.h>

#include <cstdint>

#include "core/dtype.h"

namespace fathom::cpu {
namespace {

// Transposes 16 rows (ldw apart) × 16 pairs of w into 16 pairs × 16 rows,
// ldp elements apart: out row p holds pair p of rows 0..15.
inline void pack_pairs16_avx512(const bf16_t* w, int64_t ldw, bf16_t* out, int64_t ldp) {
  __m512i r[16], t[16];
  for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_si512(w + c * ldw);
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane L: rows 2i, 2i+1 at pairs 4L..4L+1 (even t), 4L+2..4L+3 (odd t)
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int j = 0; j < 4; ++j) {  // lane L of r[4j + q]: rows 4j..4j+3 at pair 4L + q
    r[4 * j] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
    r[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
    r[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
    r[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
  }
  for (int q = 0; q < 4; ++q) {  // 4 × 4 transpose of 128-bit lanes across r[q], r[4 + q], r[8 + q], r[12 + q]
    const __m512i a = _mm512_shuffle_i32x4(r[q], r[4 + q], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i b = _mm512_shuffle_i32x4(r[q], r[4 + q], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i c = _mm512_shuffle_i32x4(r[8 + q], r[12 + q], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i d = _mm512_shuffle_i32x4(r[8 + q], r[12 + q], _MM_SHUFFLE(3, 1, 3, 1));
    _mm512_storeu_si512(out + (0 + q) * ldp, _mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(out + (4 + q) * ldp, _mm512_shuffle_i32x4(b, d, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(out + (8 + q) * ldp, _mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_si512(out + (12 + q) * ldp, _mm512_shuffle_i32x4(b, d, _MM_SHUFFLE(3, 1, 3, 1)));
  }
}

// Rows 2p and 2p + 1 of v [n, d] (ldv apart) side by side for p < pairs, in
// panels of `cols` columns one after another (pairs · cols · 2 elements
// each): panel[(p · cols + c) · 2 + t] = v[2p + t][c0 + c]. Rows at or past n
// are zero, so a pair kernel may run past n against whatever finite x lies
// there. d a multiple of cols, cols of 32.
inline void pack_row_pairs_avx512(const bf16_t* v, int64_t ldv, int64_t n, int64_t d, int64_t pairs, int64_t cols,
                                  bf16_t* out) {
  alignas(64) int16_t lo_index[32], hi_index[32];
  for (int i = 0; i < 16; ++i) {  // element i of the first row, then element i of the second (index 32 + i)
    lo_index[2 * i] = int16_t(i), lo_index[2 * i + 1] = int16_t(32 + i);
    hi_index[2 * i] = int16_t(16 + i), hi_index[2 * i + 1] = int16_t(48 + i);
  }
  const __m512i lo = _mm512_load_si512(lo_index), hi = _mm512_load_si512(hi_index), zero = _mm512_setzero_si512();
  for (int64_t p = 0; p < pairs; ++p) {
    const bf16_t* r0 = v + 2 * p * ldv;
    const bf16_t* r1 = r0 + ldv;
    for (int64_t c = 0; c < d; c += 32) {
      const __m512i a = 2 * p < n ? _mm512_loadu_si512(r0 + c) : zero;
      const __m512i b = 2 * p + 1 < n ? _mm512_loadu_si512(r1 + c) : zero;
      bf16_t* dst = out + (c / cols) * pairs * cols * 2 + (p * cols + c % cols) * 2;
      _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(a, lo, b));
      _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi16(a, hi, b));
    }
  }
}

// A 16 × 16 block of f32 (block[r][c]) written transposed: s[c][j0 + r] for
// c < rows (lds apart), through the same 32-bit transpose.
inline void store_transposed16(const float (&block)[16][16], int64_t rows, float* s, int64_t lds) {
  if (rows == 16) return pack_pairs16_avx512(reinterpret_cast<const bf16_t*>(block), 32, reinterpret_cast<bf16_t*>(s), 2 * lds);
  alignas(64) float t[16][16];
  pack_pairs16_avx512(reinterpret_cast<const bf16_t*>(block), 32, reinterpret_cast<bf16_t*>(t), 32);
  for (int64_t c = 0; c < rows; ++c) _mm512_storeu_ps(s + c * lds, _mm512_load_ps(t[c]));
}

// Up to 16 rows of q [rows, d] (ldq apart; missing rows zero) in pairs order
// for 16 columns: out[(p · 16 + r) · 2 + t] = q[r][2p + t]. d a multiple of 32.
inline void pack_query_pairs(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, bf16_t* out) {
  alignas(64) bf16_t padded[16 * 32];
  for (int64_t p0 = 0; p0 < d / 2; p0 += 16) {
    const bf16_t* src = q + 2 * p0;
    int64_t ld = ldq;
    if (rows < 16) {  // the 32 columns of this step, zero past the last row
      for (int64_t r = 0; r < 16; ++r)
        _mm512_store_si512(padded + r * 32, r < rows ? _mm512_loadu_si512(q + r * ldq + 2 * p0) : _mm512_setzero_si512());
      src = padded, ld = 32;
    }
    pack_pairs16_avx512(src, ld, out + p0 * 32, 32);
  }
}

}  // namespace
}  // namespace fathom::cpu
