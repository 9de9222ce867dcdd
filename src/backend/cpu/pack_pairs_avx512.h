#pragma once
// The pair transpose shared by the AVX-512 pair kernel and the AMX tiles: both
// multiply w in "pairs" order, two consecutive k of one column side by side.
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

}  // namespace
}  // namespace fathom::cpu
