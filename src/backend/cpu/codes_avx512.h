#pragma once
// Reading `bits`-wide codes out of a little-endian bit stream, 16 lanes at a
// time. Only for translation units compiled with AVX-512 (F, BW).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace fathom::cpu {

// Codes [i, i + 16) of a little-endian stream of `bits`-wide codes, as 16 lanes.
// For 3 and 6 bits the gather reads up to 3 bytes past code i + 15, so callers
// keep the last 16 codes of a stream for the plain path.
inline __m512i codes16(const uint32_t* words, int bits, int64_t i) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i mask = _mm512_set1_epi32((1 << bits) - 1);
  if ((bits & (bits - 1)) == 0) {
    const int per_word = 32 / bits;
    const int shift_words = __builtin_ctz(per_word);  // per_word is a power of two: no division
    const __m512i word_of_lane = _mm512_srli_epi32(lane, shift_words);
    // 1-bit codes: 16 codes are half a word, and may start at its middle.
    const int first_bit = int(i & (per_word - 1)) * bits;
    const __m512i shift = _mm512_add_epi32(
        _mm512_mullo_epi32(_mm512_and_si512(lane, _mm512_set1_epi32(per_word - 1)), _mm512_set1_epi32(bits)),
        _mm512_set1_epi32(first_bit));
    // Exactly the words that hold the 16 codes, by plain loads: a masked
    // 64-byte load whose masked-off part reaches a page not yet touched (a
    // mapped weight file) takes a microcode assist, and costs more than the rest.
    const uint32_t* at = words + (i >> shift_words);
    __m512i w;
    switch (std::max(1, 16 / per_word)) {
      case 1: w = _mm512_castsi128_si512(_mm_cvtsi32_si128(int(at[0]))); break;
      case 2: w = _mm512_castsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at))); break;
      case 4: w = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at))); break;
      default: w = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at))); break;
    }
    return _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(word_of_lane, w), shift), mask);
  }
  const __m512i at = _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(bits)),
                                      _mm512_set1_epi32(int(i * bits)));
  const __m512i got = _mm512_i32gather_epi32(_mm512_srli_epi32(at, 3), reinterpret_cast<const char*>(words), 1);
  return _mm512_and_si512(_mm512_srlv_epi32(got, _mm512_and_si512(at, _mm512_set1_epi32(7))), mask);
}

// How many leading codes of an n-code stream codes16 may take.
inline int64_t simd_codes(int bits, int64_t n) {
  const int64_t usable = (bits & (bits - 1)) == 0 ? n : n - 16;
  return usable > 0 ? usable / 16 * 16 : 0;
}

inline int32_t code_at(const uint32_t* words, int bits, int64_t i) {
  const int64_t bit = i * bits, w = bit >> 5, shift = bit & 31;
  uint64_t both = words[w];
  if (shift + bits > 32) both |= uint64_t(words[w + 1]) << 32;
  return int32_t((both >> shift) & ((1u << bits) - 1));
}

}  // namespace fathom::cpu
