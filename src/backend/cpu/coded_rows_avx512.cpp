// AVX-512 attention products over coded rows (coded_rows.h), compiled with
// matmul_avx512.cpp's flags.
//
// Codes are widened 16 at a time in registers and multiplied there; no f32
// row is ever stored. Per element that is an unpack, one convert (affine) or
// table permute (codebook), and one multiply-add per query. What a row's
// group or row scale contributes is applied once per (row, group), not per
// element:
//   scores  q·k = Σ_g scale_g · (Σ_{i∈g} q_i code_i) + bias_g · (Σ_{i∈g} q_i),
//           the bias terms added for a whole block of rows at once;
//   values  out_i += Σ_j (p_j scale_jg) · code_ji, the weights p_j scale_jg
//           prepared per block of rows, and Σ_j p_j bias_jg summed per group
//           beside them and added once at the end.
// A call covers about one block of the cache (64 rows), so its own set-up is
// vectorized too and free of divisions: it is paid per block, not per row.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/cpu/coded_rows.h"

namespace fathom::cpu {
namespace {

// Lanes [0, count) of a vector, count clamped to [0, 16].
inline __mmask16 first_lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

inline __m512i lane_index() { return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }

// ---- Unpacking: kBlock codes, packed in the kBytes at `at`, as kBlock / 16
// vectors of int32, in natural order unless the unpacker says otherwise.
// kExact = false leaves neighbouring bits above each code: a table lookup
// reads only the low 4 bits, and its table repeats with the code's period.

// 8 bits: one zero-extending load per 16 codes.
struct Bytes {
  static constexpr int kBlock = 16, kBytes = 16;
  static constexpr bool kNatural = true;
  template <bool kExact>
  static void load(const uint8_t* at, __m512i* out) {
    out[0] = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
  }
};

// 4 bits: 16 bytes zero-extended hold 32 codes, the low nibbles being the even
// elements and the high nibbles the odd ones. Queries and value sums are kept
// in that "pair order" for the whole call instead of shuffling every row.
struct Nibbles {
  static constexpr int kBlock = 32, kBytes = 16;
  static constexpr bool kNatural = false;
  template <bool kExact>
  static void load(const uint8_t* at, __m512i* out) {
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
    out[0] = kExact ? _mm512_and_si512(x, _mm512_set1_epi32(15)) : x;
    out[1] = _mm512_srli_epi32(x, 4);
  }
  // x[0, 32) → pair order: the even elements, then the odd ones.
  static void to_order(const float* x, float* out) {
    const __m512i even = _mm512_add_epi32(lane_index(), lane_index());
    const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    _mm512_storeu_ps(out, _mm512_permutex2var_ps(a, even, b));
    _mm512_storeu_ps(out + 16, _mm512_permutex2var_ps(a, _mm512_add_epi32(even, _mm512_set1_epi32(1)), b));
  }
  // out[0, 32) += x (32 floats in pair order) put back in element order, + add.
  static void add_from_order(const float* x, __m512 add, float* out) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), _mm512_add_ps(_mm512_permutex2var_ps(a, lo, b), add)));
    _mm512_storeu_ps(out + 16,
                     _mm512_add_ps(_mm512_loadu_ps(out + 16), _mm512_add_ps(_mm512_permutex2var_ps(a, hi, b), add)));
  }
};

// Any width up to 8 bits (used for 1, 2, 3 and 6): 16 codes span 2·bits
// bytes, so the block's bytes are repeated in every 128-bit lane and one
// in-lane byte shuffle brings each code's two bytes into its lane; a shift
// (and a mask) finish it. Widths ≤ 4 bits take 32 codes per load. Unlike a
// gather this costs a few register operations, and codes that cross a word
// (3 and 6 bits) need nothing special.
template <int kBits>
struct Shuffled {
  static constexpr int kBlock = 4 * kBits <= 16 ? 32 : 16;
  static constexpr int kBytes = kBlock * kBits / 8;
  static constexpr bool kNatural = true;
  struct Plan {
    alignas(64) uint8_t pick[kBlock / 16][64];
    alignas(64) uint32_t shift[kBlock / 16][16];
  };
  static constexpr Plan plan() {
    Plan p{};
    for (int pos = 0; pos < kBlock; ++pos) {
      const int v = pos / 16, lane = pos % 16, bit = pos * kBits, byte = bit / 8;
      p.pick[v][4 * lane] = uint8_t(byte);  // pick indexes the lane's own 16 bytes: the block's, repeated
      p.pick[v][4 * lane + 1] = byte + 1 < kBytes ? uint8_t(byte + 1) : 0x80;  // 0x80: zero
      p.pick[v][4 * lane + 2] = p.pick[v][4 * lane + 3] = 0x80;
      p.shift[v][lane] = uint32_t(bit % 8);
    }
    return p;
  }
  template <bool kExact>
  static void load(const uint8_t* at, __m512i* out) {
    static constexpr Plan p = plan();
    // A masked load: the last block of the last row may end the buffer.
    const __m512i bytes = _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8(__mmask16((1u << kBytes) - 1), at));
    for (int v = 0; v < kBlock / 16; ++v) {
      const __m512i got = _mm512_srlv_epi32(_mm512_shuffle_epi8(bytes, _mm512_load_si512(p.pick[v])),
                                            _mm512_load_si512(p.shift[v]));
      out[v] = kExact ? _mm512_and_si512(got, _mm512_set1_epi32((1 << kBits) - 1)) : got;
    }
  }
};

// ---- Widening of codes to the factor they multiply.
struct Affine {  // the code itself; scale and bias are applied per group
  static constexpr bool kExact = true;
  __m512 operator()(__m512i c) const { return _mm512_cvtepi32_ps(c); }
};
struct Table {  // the codebook entry, from a 16-entry table in one register; the row scale is applied per row
  static constexpr bool kExact = false;
  __m512 lookup;
  __m512 operator()(__m512i c) const { return _mm512_permutexvar_ps(c, lookup); }
};

// Rows per block: a block's parameters and weights fit a small scratch, and
// its 4- or 8-bit codes (a few KiB at d ≤ 256) stay in L1 across the passes
// that query sub-groups and column chunks make over them. A multiple of 16.
constexpr int64_t kRows = 64;

// Up to kRows rows as the inner loops see them, parameters in f32.
struct Block {
  const uint8_t* bytes;
  int64_t row_bytes;
  int64_t groups, group;  // a codebook row is one group of d
  int group_shift;        // column >> group_shift = its group (62 for a codebook: always 0)
  const float* scale;     // [rows, groups]: affine scales or codebook row scales
  const float* bias;      // [rows, groups]; affine only
  const uint8_t* row(int64_t j) const { return bytes + j * row_bytes; }
};

// Sums kept in registers at once in scores: 8 independent multiply-add chains
// cover 2 FMA pipes × 4 cycles of latency, and with their 8 group totals
// they leave half the registers for codes and queries.
constexpr int kSums = 8;

// Rows arrive as short streams, a block of the cache per call, and are read
// from memory in a decode step. Values ask for the bytes 4 KiB ahead of each
// row (the distance attention_decode_avx512.inc measured best for bf16
// rows). Scores ask for the first 2 KiB of their block up front and then
// 2 KiB ahead of each tile: measured over 64 caches × 4096 rows (more than
// the L3), that beat 4 KiB ahead (which left 3-bit keys, 48-byte rows, half
// as fast) and beat asking for the whole block up front.
constexpr int64_t kValuesAhead = 4096, kScoresAhead = 2048;

// Horizontal sums of 8 vectors: out[i] = Σ lanes of a[i]. The transposing
// reduction of reduce16_avx512 (matmul_avx512.cpp), one level shorter.
inline void reduce8(const __m512* a, float* out) {
  __m512 b[4], c[2];
  for (int i = 0; i < 4; ++i)  // 128-bit lanes 0–1 of b[i]: 8 partials of a[2i]; lanes 2–3: of a[2i + 1]
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int i = 0; i < 2; ++i)  // 128-bit lane L of c[i]: 4 partials of a[4i + L]
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane L: [a[L], a[4 + L], a[L], a[4 + L]], two partials each, then totals.
  const __m512 s = _mm512_add_ps(_mm512_unpacklo_ps(c[0], c[1]), _mm512_unpackhi_ps(c[0], c[1]));
  const __m512 r = _mm512_add_ps(s, _mm512_shuffle_ps(s, s, _MM_SHUFFLE(1, 0, 3, 2)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, r);
  for (int l = 0; l < 4; ++l) {
    out[l] = lanes[4 * l];
    out[4 + l] = lanes[4 * l + 1];
  }
}

// ---- Scores of rows [j, j + R) for G queries (q [G, d] in U's order),
// without the bias terms: each query vector and each unpacked code serves
// several sums, and each group's sums are scaled into the row totals once.
template <class U, class W, int G, int R>
void scores_rows(const float* q, int64_t d, const Block& c, W widen, int64_t j, float* scores, int64_t ld) {
  constexpr int V = U::kBlock / 16;
  const uint8_t* rows = c.row(j);
  for (int64_t at = 0; at < R * c.row_bytes; at += 64) __builtin_prefetch(rows + at + kScoresAhead, 0, 3);
  __m512 tot[kSums];
  for (auto& t : tot) t = _mm512_setzero_ps();
  const uint8_t* block = rows;  // the current codes of the first row
  for (int64_t g = 0; g < c.groups; ++g) {
    __m512 acc[kSums];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t i = g * c.group; i < (g + 1) * c.group; i += U::kBlock, block += U::kBytes) {
      __m512 qv[G][V];
      for (int qi = 0; qi < G; ++qi)
        for (int v = 0; v < V; ++v) qv[qi][v] = _mm512_loadu_ps(q + qi * d + i + 16 * v);
      for (int r = 0; r < R; ++r) {
        __m512i codes[V];
        U::template load<W::kExact>(block + r * c.row_bytes, codes);
        for (int v = 0; v < V; ++v) {
          const __m512 x = widen(codes[v]);
          for (int qi = 0; qi < G; ++qi) acc[r * G + qi] = _mm512_fmadd_ps(qv[qi][v], x, acc[r * G + qi]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(c.scale[(j + r) * c.groups + g]);
      for (int qi = 0; qi < G; ++qi) tot[r * G + qi] = _mm512_fmadd_ps(acc[r * G + qi], s, tot[r * G + qi]);
    }
  }
  alignas(64) float sums[kSums];
  reduce8(tot, sums);
  for (int r = 0; r < R; ++r)
    for (int qi = 0; qi < G; ++qi) scores[qi * ld + j + r] = sums[r * G + qi];
}

// kSums / G rows at a time, then one by one.
template <class U, class W, int G>
void scores_queries(const float* q, int64_t d, const Block& c, W widen, int64_t n, float* scores, int64_t ld) {
  constexpr int R = kSums / G;
  int64_t j = 0;
  for (; j + R <= n; j += R) scores_rows<U, W, G, R>(q, d, c, widen, j, scores, ld);
  for (; j < n; ++j) scores_rows<U, W, G, 1>(q, d, c, widen, j, scores, ld);
}

// scores[qi · ld + j] += Σ_g bias[j, g] · q_sums[qi, g] for the block's m rows,
// vectorized over (row, group) pairs: the products for 16 rows, then
// neighbours summed pairwise until one lane is left per row. kGroups divides 16.
template <int kGroups>
void add_key_biases(const Block& c, int64_t m, const float* q_sums, int64_t nq, float* scores, int64_t ld) {
  const __m512i even = _mm512_add_epi32(lane_index(), lane_index());
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i group_of_lane = _mm512_and_si512(lane_index(), _mm512_set1_epi32(kGroups - 1));
  for (int64_t qi = 0; qi < nq; ++qi) {
    const __m512 sums =
        _mm512_permutexvar_ps(group_of_lane, _mm512_maskz_loadu_ps(first_lanes(kGroups), q_sums + qi * kGroups));
    for (int64_t j0 = 0; j0 < m; j0 += 16) {
      __m512 part[kGroups];  // pairs [16k, 16k + 16) of rows [j0, j0 + 16)
      for (int k = 0; k < kGroups; ++k) {
        const int64_t at = j0 * kGroups + 16 * k;
        part[k] = _mm512_mul_ps(_mm512_maskz_loadu_ps(first_lanes(m * kGroups - at), c.bias + at), sums);
      }
      for (int width = kGroups; width > 1; width /= 2)
        for (int k = 0; k < width / 2; ++k)
          part[k] = _mm512_add_ps(_mm512_permutex2var_ps(part[2 * k], even, part[2 * k + 1]),
                                  _mm512_permutex2var_ps(part[2 * k], odd, part[2 * k + 1]));
      const __mmask16 live = first_lanes(m - j0);
      float* s = scores + qi * ld + j0;
      _mm512_mask_storeu_ps(s, live, _mm512_add_ps(_mm512_maskz_loadu_ps(live, s), part[0]));
    }
  }
}

void add_key_biases(const Block& c, int64_t m, const float* q_sums, int64_t nq, float* scores, int64_t ld) {
  switch (c.groups) {
    case 1: return add_key_biases<1>(c, m, q_sums, nq, scores, ld);
    case 2: return add_key_biases<2>(c, m, q_sums, nq, scores, ld);
    case 4: return add_key_biases<4>(c, m, q_sums, nq, scores, ld);
    case 8: return add_key_biases<8>(c, m, q_sums, nq, scores, ld);
    case 16: return add_key_biases<16>(c, m, q_sums, nq, scores, ld);
  }
  for (int64_t qi = 0; qi < nq; ++qi)  // e.g. 3 groups (d = 96)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t g = 0; g < c.groups; ++g)
        scores[qi * ld + j] += c.bias[j * c.groups + g] * q_sums[qi * c.groups + g];
}

// ---- Values for G queries over columns [c0, c0 + 16·CV) (in U's order):
// acc[G, d] += Σ_j w_j · codes_j, w[qi · w_ld + j · groups + g] = p · scale
// for the G queries. GV: 16-column vectors per group (0: one weight per
// row), fixed at compile time so that each weight's address is a constant
// offset from the row's; computed per vector it costs a register each.
template <class U, class W, int G, int CV, int GV>
void values_columns(const float* w, int64_t w_ld, const Block& c, W widen, int64_t n, int64_t c0, int64_t d,
                    float* acc) {
  constexpr int V = U::kBlock / 16;
  __m512 sum[G][CV];
  for (int qi = 0; qi < G; ++qi)
    for (int v = 0; v < CV; ++v) sum[qi][v] = _mm512_loadu_ps(acc + qi * d + c0 + 16 * v);
  const float* wq[G];  // the weights of query qi, row j, the pass's first group
  for (int qi = 0; qi < G; ++qi) wq[qi] = w + qi * w_ld + (c0 >> c.group_shift);
  const uint8_t* at = c.bytes + c0 / U::kBlock * U::kBytes;  // the pass's first codes in row j
  for (int64_t j = 0; j < n; ++j, at += c.row_bytes) {
    if (c0 == 0) __builtin_prefetch(at + kValuesAhead, 0, 3);
    for (int b = 0; b < CV / V; ++b) {
      __m512i codes[V];
      U::template load<W::kExact>(at + b * U::kBytes, codes);
      for (int vv = 0; vv < V; ++vv) {
        const int v = b * V + vv;
        const __m512 x = widen(codes[vv]);
        for (int qi = 0; qi < G; ++qi)
          sum[qi][v] = _mm512_fmadd_ps(_mm512_set1_ps(wq[qi][GV ? v / GV : 0]), x, sum[qi][v]);
      }
    }
    for (int qi = 0; qi < G; ++qi) wq[qi] += c.groups;
  }
  for (int qi = 0; qi < G; ++qi)
    for (int v = 0; v < CV; ++v) _mm512_storeu_ps(acc + qi * d + c0 + 16 * v, sum[qi][v]);
}

// Columns [c0, d) in passes of CV vectors, then of CV / 2, down to one
// unpacked block: for G ≤ 2 and d = 128 the sums of a whole row fit 16
// registers, so each row is read once and its 16 multiply-add chains hide
// their latency.
template <class U, class W, int G, int GV, int CV>
void values_from(const float* w, int64_t w_ld, const Block& c, W widen, int64_t d, int64_t n, int64_t c0,
                 float* acc) {
  for (; c0 + 16 * CV <= d; c0 += 16 * CV) values_columns<U, W, G, CV, GV>(w, w_ld, c, widen, n, c0, d, acc);
  if constexpr (CV > U::kBlock / 16)
    if (c0 < d) values_from<U, W, G, GV, CV / 2>(w, w_ld, c, widen, d, n, c0, acc);
}

template <class U, class W, int G>
void values_queries(const float* w, int64_t w_ld, const Block& c, W widen, int64_t d, int64_t n, float* acc) {
  constexpr int CV = std::max(U::kBlock / 16, std::min(8, 16 / G));
  if constexpr (!std::is_same_v<W, Affine>) {
    values_from<U, W, G, 0, CV>(w, w_ld, c, widen, d, n, 0, acc);
  } else {
    switch (c.group) {  // 32, 64 or 128, the group sizes dispatch() lets through
      case 32: return values_from<U, W, G, 2, CV>(w, w_ld, c, widen, d, n, 0, acc);
      case 64: return values_from<U, W, G, 4, CV>(w, w_ld, c, widen, d, n, 0, acc);
      default: return values_from<U, W, G, 8, CV>(w, w_ld, c, widen, d, n, 0, acc);
    }
  }
}

// The weights of a block's m rows, w[qi · w_ld + j · groups + g] = p[qi · ld + j] ·
// scale[j · groups + g], and bias_lanes[qi · 16 + l] += the same products with
// the biases (when given), lane l collecting group l % groups. Vectorized over
// (row, group) pairs when groups divides 16, else bias_sums[qi, g] collects
// them one by one.
void weigh_rows(const float* p, int64_t ld, int64_t nq, const Block& c, int64_t m, float* w, int64_t w_ld,
                float* bias_lanes, float* bias_sums) {
  const int64_t groups = c.groups, count = m * groups;
  if (16 % groups != 0) {
    for (int64_t qi = 0; qi < nq; ++qi)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t g = 0; g < groups; ++g) {
          const float pj = p[qi * ld + j];
          w[qi * w_ld + j * groups + g] = pj * c.scale[j * groups + g];
          if (c.bias) bias_sums[qi * groups + g] += pj * c.bias[j * groups + g];
        }
    return;
  }
  const __m128i shift = _mm_cvtsi32_si128(__builtin_ctzll(uint64_t(groups)));
  for (int64_t qi = 0; qi < nq; ++qi) {
    // Two sums in turn, to halve the chain of dependent multiply-adds.
    __m512 even_sum = _mm512_setzero_ps(), odd_sum = _mm512_setzero_ps();
    for (int64_t j0 = 0; j0 < m; j0 += 16) {
      const __m512 pv = _mm512_maskz_loadu_ps(first_lanes(m - j0), p + qi * ld + j0);
      __m512i pair = lane_index();  // (row, group) pairs [16k, 16k + 16) of rows [j0, j0 + 16)
      for (int64_t k = 0; k < groups; ++k, pair = _mm512_add_epi32(pair, _mm512_set1_epi32(16))) {
        const int64_t at = j0 * groups + 16 * k;
        const __mmask16 live = first_lanes(count - at);
        const __m512 pe = _mm512_permutexvar_ps(_mm512_srl_epi32(pair, shift), pv);  // each pair's p
        _mm512_storeu_ps(w + qi * w_ld + at, _mm512_mul_ps(pe, _mm512_maskz_loadu_ps(live, c.scale + at)));
        if (!c.bias) continue;
        const __m512 bias = _mm512_maskz_loadu_ps(live, c.bias + at);
        if (k & 1) odd_sum = _mm512_fmadd_ps(pe, bias, odd_sum);
        else even_sum = _mm512_fmadd_ps(pe, bias, even_sum);
      }
    }
    if (c.bias) {
      float* lanes = bias_lanes + qi * 16;
      _mm512_storeu_ps(lanes, _mm512_add_ps(_mm512_loadu_ps(lanes), _mm512_add_ps(even_sum, odd_sum)));
    }
  }
}

// Queries in sub-groups of 8, 4, 2, 1; each re-reads the block's rows, from L1.
template <class F>
void for_query_groups(int64_t nq, F f) {
  int64_t qi = 0;
  for (; qi + 8 <= nq; qi += 8) f(std::integral_constant<int, 8>{}, qi);
  if (nq - qi >= 4) f(std::integral_constant<int, 4>{}, qi), qi += 4;
  if (nq - qi >= 2) f(std::integral_constant<int, 2>{}, qi), qi += 2;
  if (nq - qi >= 1) f(std::integral_constant<int, 1>{}, qi);
}

// Per-thread scratch, grown once and reused by every call.
float* scratch(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// Rows [j0, j0 + m) as a Block. Affine scales and biases are widened into
// params [2, kRows · groups]; a codebook's row scales are used in place.
Block block_at(const CodedRows& rows, int64_t d, int64_t j0, int64_t m, float* params) {
  const int64_t row_bytes = rows.words * 4;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(rows.codes) + j0 * row_bytes;
  if (rows.table) return {bytes, row_bytes, 1, d, 62, rows.row_scales + j0, nullptr};
  const int64_t groups = d / rows.group, count = m * groups;
  float* scale = params;
  float* bias = params + kRows * groups;
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 live = first_lanes(count - i);
    const auto to_f32 = [&](const bf16_t* src) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(live, src + i)), 16));
    };
    _mm512_storeu_ps(scale + i, to_f32(rows.scales + j0 * groups));
    _mm512_storeu_ps(bias + i, to_f32(rows.biases + j0 * groups));
  }
  return {bytes, row_bytes, groups, rows.group, __builtin_ctz(unsigned(rows.group)), scale, bias};
}

template <class U, class W>
void scores_with(const float* q, int64_t nq, int64_t d, const CodedRows& k, int64_t n, float* scores, int64_t ld,
                 W widen) {
  constexpr bool kAffine = std::is_same_v<W, Affine>;
  const int64_t groups = kAffine ? d / k.group : 1;
  // One block's parameters, Σ q over each group [nq, groups] and the queries in U's order [nq, d].
  float* params = scratch(size_t(2 * kRows * groups + nq * groups + (U::kNatural ? 0 : nq * d)));
  float* q_sums = params + 2 * kRows * groups;
  const float* qu = q;
  if constexpr (!U::kNatural) {
    float* reordered = q_sums + nq * groups;
    for (int64_t i = 0; i < nq * d; i += U::kBlock) U::to_order(q + i, reordered + i);
    qu = reordered;
  }
  if constexpr (kAffine)
    for (int64_t qi = 0; qi < nq; ++qi)
      for (int64_t g = 0; g < groups; ++g) {
        __m512 s = _mm512_setzero_ps();
        for (int64_t i = 0; i < k.group; i += 16) s = _mm512_add_ps(s, _mm512_loadu_ps(q + qi * d + g * k.group + i));
        q_sums[qi * groups + g] = _mm512_reduce_add_ps(s);
      }
  for (int64_t j0 = 0; j0 < n; j0 += kRows) {
    const int64_t m = std::min(kRows, n - j0);
    const Block c = block_at(k, d, j0, m, params);
    for (int64_t at = 0; at < std::min(m * c.row_bytes, kScoresAhead); at += 64) __builtin_prefetch(c.bytes + at, 0, 3);
    for_query_groups(nq, [&](auto g_tag, int64_t q0) {
      constexpr int G = decltype(g_tag)::value;
      scores_queries<U, W, G>(qu + q0 * d, d, c, widen, m, scores + q0 * ld + j0, ld);
    });
    if constexpr (kAffine) add_key_biases(c, m, q_sums, nq, scores + j0, ld);
  }
}

template <class U, class W>
void values_with(const float* p, int64_t ld, int64_t nq, const CodedRows& v, int64_t d, int64_t n, float* out,
                 W widen) {
  constexpr bool kAffine = std::is_same_v<W, Affine>;
  const int64_t groups = kAffine ? d / v.group : 1, w_ld = kRows * groups;
  // One block's parameters and weights [nq, kRows · groups], the bias sums
  // [nq, groups], and the value sums [nq, d] in U's order (out itself when
  // that is the natural order).
  const bool lanes_fit = 16 % groups == 0;
  float* params = scratch(size_t(2 * kRows * groups + nq * w_ld + nq * groups + nq * 16 + (U::kNatural ? 0 : nq * d)));
  float* w = params + 2 * kRows * groups;
  float* bias_sums = w + nq * w_ld;           // [nq, groups]
  float* bias_lanes = bias_sums + nq * groups;  // [nq, 16], see weigh_rows
  float* acc = out;
  if constexpr (!U::kNatural) {
    acc = bias_lanes + nq * 16;
    for (int64_t i = 0; i < nq * d; i += 16) _mm512_storeu_ps(acc + i, _mm512_setzero_ps());
  }
  if constexpr (kAffine) {
    for (int64_t qi = 0; qi < nq; ++qi) _mm512_storeu_ps(bias_lanes + qi * 16, _mm512_setzero_ps());
    if (!lanes_fit) std::fill(bias_sums, bias_sums + nq * groups, 0.0f);
  }
  for (int64_t j0 = 0; j0 < n; j0 += kRows) {
    const int64_t m = std::min(kRows, n - j0);
    const Block c = block_at(v, d, j0, m, params);
    weigh_rows(p + j0, ld, nq, c, m, w, w_ld, bias_lanes, bias_sums);
    for_query_groups(nq, [&](auto g_tag, int64_t q0) {
      constexpr int G = decltype(g_tag)::value;
      values_queries<U, W, G>(w + q0 * w_ld, w_ld, c, widen, d, m, acc + q0 * d);
    });
  }
  if (kAffine && lanes_fit)
    for (int64_t qi = 0; qi < nq; ++qi)
      for (int64_t g = 0; g < groups; ++g) {
        float s = 0.0f;
        for (int64_t l = g; l < 16; l += groups) s += bias_lanes[qi * 16 + l];
        bias_sums[qi * groups + g] = s;
      }
  if (!kAffine && U::kNatural) return;
  const int shift = kAffine ? __builtin_ctz(unsigned(v.group)) : 62;
  for (int64_t qi = 0; qi < nq; ++qi)
    for (int64_t i = 0; i < d; i += U::kBlock) {
      const __m512 bias = _mm512_set1_ps(kAffine ? bias_sums[qi * groups + (i >> shift)] : 0.0f);
      float* o = out + qi * d + i;
      if constexpr (U::kNatural) {
        for (int e = 0; e < U::kBlock; e += 16) _mm512_storeu_ps(o + e, _mm512_add_ps(_mm512_loadu_ps(o + e), bias));
      } else {
        U::add_from_order(acc + qi * d + i, bias, o);
      }
    }
}

// Calls f(U{}, widen) for the rows' width and kind; false for layouts the
// fast kernels do not take (the reference then does the work).
template <class F>
bool dispatch(const CodedRows& rows, int64_t d, F f) {
  if (d % 32 != 0) return false;
  if (rows.table) {
    if (rows.bits < 1 || rows.bits > 4) return false;
    // Repeated to 16 entries: lookups see neighbouring bits above a code (kExact = false).
    alignas(64) float repeated[16];
    for (int i = 0; i < 16; ++i) repeated[i] = rows.table[i % (1 << rows.bits)];
    const Table t{_mm512_load_ps(repeated)};
    switch (rows.bits) {
      case 1: f(Shuffled<1>{}, t); return true;
      case 2: f(Shuffled<2>{}, t); return true;
      case 3: f(Shuffled<3>{}, t); return true;
      case 4: f(Nibbles{}, t); return true;
    }
    return false;
  }
  if ((rows.group != 32 && rows.group != 64 && rows.group != 128) || d % rows.group != 0) return false;
  switch (rows.bits) {
    case 2: f(Shuffled<2>{}, Affine{}); return true;
    case 3: f(Shuffled<3>{}, Affine{}); return true;
    case 4: f(Nibbles{}, Affine{}); return true;
    case 6: f(Shuffled<6>{}, Affine{}); return true;
    case 8: f(Bytes{}, Affine{}); return true;
  }
  return false;
}

}  // namespace

void coded_scores_avx512(const float* q, int64_t nq, int64_t d, const CodedRows& k, int64_t n, float* scores,
                         int64_t ld) {
  const bool done = dispatch(k, d, [&](auto u, auto widen) {
    scores_with<decltype(u)>(q, nq, d, k, n, scores, ld, widen);
  });
  if (!done) coded_scores_reference(q, nq, d, k, n, scores, ld);
}

void coded_values_avx512(const float* p, int64_t ld, int64_t nq, const CodedRows& v, int64_t d, int64_t n,
                         float* out) {
  const bool done = dispatch(v, d, [&](auto u, auto widen) {
    values_with<decltype(u)>(p, ld, nq, v, d, n, out, widen);
  });
  if (!done) coded_values_reference(p, ld, nq, v, d, n, out);
}

}  // namespace fathom::cpu
