#pragma once
// CPU kernels. Every fast kernel has a plain reference beside it that the
// tests compare against on random inputs.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"

namespace fathom::cpu {

// One matmul as the kernels see it: y[M, N] = x[M, K] · w[N, K]ᵀ + bias.
struct MatmulArgs {
  const float* x = nullptr;    // [M, K]; already rounded to bf16 values when xb is set
  const bf16_t* xb = nullptr;  // [M, K] bf16 copy of x for bf16 compute, or null
  const void* w = nullptr;     // [N, K], f32 or bf16
  DType w_dtype = DType::f32;
  const float* bias = nullptr;  // [N] or null
  float* y = nullptr;           // [M, N]
  int64_t M = 0, N = 0, K = 0;
};

// Computes output columns [n0, n1) for every row. Threads split N.
using MatmulSlice = void (*)(const MatmulArgs&, int64_t n0, int64_t n1);

// Steps of up to this many rows (decode, speculative verify: the pending
// token and up to 15 drafts, small batches) take every kernel set's per-row
// GEMV: each row gets the bits it gets alone, whichever rows share the step.
inline constexpr int64_t kGemvMaxRows = 16;

void matmul_slice_reference(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_slice_avx2(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_slice_avx512(const MatmulArgs& a, int64_t n0, int64_t n1);
// AVX-512 plus AMX-BF16 tiles for prefill (bf16 x and w, more than
// kGemvMaxRows rows): only where amx_bf16_available(). The tests also run the
// same kernel with the tile instructions emulated
// (tests/backend/amx_emulated_tiles.cpp), so any AVX-512 machine checks its
// layout.
void matmul_slice_amx(const MatmulArgs& a, int64_t n0, int64_t n1);

// y[M, N] = x[M, K] · w[K, N] with w's rows ldw apart (f32 or bf16); used by
// attention for probabilities × values.
using GemmNn = void (*)(const float* x, int64_t ldx, const void* w, DType w_dtype, int64_t ldw, int64_t M, int64_t K,
                        int64_t N, float* y, int64_t ldy);

void gemm_nn_reference(const float* x, int64_t ldx, const void* w, DType w_dtype, int64_t ldw, int64_t M, int64_t K,
                       int64_t N, float* y, int64_t ldy);
void gemm_nn_avx2(const float* x, int64_t ldx, const void* w, DType w_dtype, int64_t ldw, int64_t M, int64_t K,
                  int64_t N, float* y, int64_t ldy);
void gemm_nn_avx512(const float* x, int64_t ldx, const void* w, DType w_dtype, int64_t ldw, int64_t M, int64_t K,
                    int64_t N, float* y, int64_t ldy);

// Attention's P·V in bf16: y[M, d] += p[M, n] · v[n, d], p's rows ldp apart
// and readable to a multiple of 32 past n (the tiles' step; finite values), v's
// rows ldv apart. panel: gemm_pv_panel_elements(n, d) bf16 of scratch for v
// in pairs order. d a multiple of 32.
using GemmPv = void (*)(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n, int64_t d,
                        float* y, int64_t ldy, bf16_t* panel);
inline int64_t gemm_pv_panel_elements(int64_t n, int64_t d) { return (n + 32) * d; }
void gemm_pv_reference(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n, int64_t d,
                       float* y, int64_t ldy, bf16_t* panel);
void gemm_pv_avx512(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n, int64_t d,
                    float* y, int64_t ldy, bf16_t* panel);
void gemm_pv_amx(const bf16_t* p, int64_t ldp, const bf16_t* v, int64_t ldv, int64_t M, int64_t n, int64_t d,
                 float* y, int64_t ldy, bf16_t* panel);

// Attention's scores in bf16: s[r][j] = q[r] · k[j] for rows r < rows ≤ 16
// of q [rows, d] (ldq apart) and keys j < n (ldk apart), into s (lds apart).
// The fast kernels take the keys in place as the broadcast (or A tile) side
// and the 16 queries as the vector side: no packing of the keys, and the
// result transposed once per 16 keys. d a multiple of 32, at most 512.
using GemmQk = void (*)(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk, int64_t n,
                        float* s, int64_t lds);
void gemm_qk_reference(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk, int64_t n,
                       float* s, int64_t lds);
void gemm_qk_avx512(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk, int64_t n,
                    float* s, int64_t lds);
void gemm_qk_amx(const bf16_t* q, int64_t ldq, int64_t rows, int64_t d, const bf16_t* k, int64_t ldk, int64_t n,
                 float* s, int64_t lds);

enum class Isa { portable, avx2, avx512 };
Isa detect_isa();
// Whether the processor has AMX-BF16 tiles and the kernel lets this process
// use them (arch_prctl ARCH_REQ_XCOMP_PERM for the tile data, asked once).
// FATHOM_AMX=0 in the environment turns them off (to compare the paths).
bool amx_bf16_available();
// Whether the processor has AVX512-VBMI (byte permutes across the whole
// vector): the 3-, 5- and 6-bit GEMV on bf16 x uses them.
bool avx512_vbmi_available();
const char* isa_name(Isa isa);

// dst[i] = bf16(src[i]), rounding to nearest even.
using ToBf16 = void (*)(const float* src, int64_t n, bf16_t* dst);
void to_bf16_reference(const float* src, int64_t n, bf16_t* dst);
void to_bf16_avx512(const float* src, int64_t n, bf16_t* dst);

// out[i] = the i-th `bits`-wide code of a little-endian bit stream, i < n.
void unpack_codes_reference(const uint32_t* words, int bits, int64_t n, int32_t* out);

// Element i of a scale or bias array stored as f32, bf16 or f16.
inline float param_at(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::bf16: return bf16_to_f32(static_cast<const bf16_t*>(p)[i]);
    case DType::f16: return f16_to_f32(static_cast<const f16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// One affine-quantized row widened: out[i] = fma(q_i, scale[g], bias[g]), g = i / group,
// the scales and biases stored as `params` (f32, bf16 or f16).
using DequantAffineRow = void (*)(const uint32_t* codes, const void* scales, const void* biases, DType params,
                                  int bits, int group, int64_t dim, float* out);
void dequant_affine_row_reference(const uint32_t* codes, const void* scales, const void* biases, DType params,
                                  int bits, int group, int64_t dim, float* out);
void dequant_affine_row_avx512(const uint32_t* codes, const void* scales, const void* biases, DType params, int bits,
                               int group, int64_t dim, float* out);
DequantAffineRow best_dequant_affine_row();

// A matmul over an affine-quantized weight: y[M, N] = x[M, K] · Wᵀ + bias, with
// W[n][k] = fma(q, scale, bias) of its group in f32 (never rounded further).
struct QuantMatmulArgs {
  const float* x = nullptr;             // [M, K]; bf16-rounded values for bf16 compute
  const void* x_planes = nullptr;       // x in quant_gemv's order (quant_gemv_planes), f32 or bf16, or null
  bool bf16_planes = false;             // x_planes are bf16 (bf16 compute: multiplied with vdpbf16ps)
  const float* x_group_sums = nullptr;  // [M, K / group]: Σ x over each group (the bias term)
  const bf16_t* xb = nullptr;           // [M, K]: x in bf16 (bf16 compute), or null
  const uint32_t* codes = nullptr;   // [N, K · bits / 32]
  const void* scales = nullptr;      // [N, K / group]
  const void* biases = nullptr;      // [N, K / group]
  DType params = DType::bf16;        // of scales and biases
  int bits = 0, group = 0;
  const float* bias = nullptr;       // [N] or null
  float* y = nullptr;                // [M, N]
  int64_t M = 0, N = 0, K = 0;
};
// Output columns [n0, n1) for every row.
using QuantMatmulSlice = void (*)(const QuantMatmulArgs&, int64_t n0, int64_t n1);
// Dequantizes each weight row and sums in double: the oracle.
void quant_matmul_reference(const QuantMatmulArgs& a, int64_t n0, int64_t n1);
// Decode and verify steps (M ≤ 16) for 2-, 4- and 8-bit codes: W is never
// materialized. Each block of 16 code words is split into planes of codes that
// sit at the same place in every word (f32 x: 32-bit lanes, plane j holding
// code j of each word) or in every half-word (bf16 x: 16-bit lanes of codes of
// at most 4 bits, an 8-bit code as two nibbles whose high one meets 16·x); x is
// reordered once to match (x_planes), each plane is multiplied with it and each
// f32 lane — 32/bits consecutive values of one group — is scaled by its group's
// scale: y = Σ_g scale_g · (q_g · x_g) + bias_g · Σ x_g.
// Whether x_planes (that order) serve these codes; otherwise x_planes stays
// null and quant_gemv reads every code width in order from x itself (3, 5 and 6
// bits: 16 codes at a time out of the two bytes each lies in).
bool quant_gemv_planes_take(int bits, int64_t K);
// Elements of x_planes per row of x.
int64_t quant_gemv_plane_elements(int bits, int64_t K, bool bf16);
// x [M, K] → x_planes (f32 or bf16, quant_gemv_plane_elements per row).
void quant_gemv_planes(const float* x, int64_t M, int64_t K, int bits, bool bf16, void* out);
void quant_gemv_avx512(const QuantMatmulArgs& a, int64_t n0, int64_t n1);
// Longer steps with bf16 x (bf16 compute): columns [n0, n1), a multiple of 16
// and at most kQuantGemmCols, through the pair dot product on the codes'
// exact bf16 values, one group of K at a time, each group's partial sums
// scaled as they are added. xb is x in bf16 [M, K]; a.x_group_sums is needed;
// scratch holds quant_gemm_scratch_bytes.
constexpr int64_t kQuantGemmCols = 64;
// What each thread's scratch holds for a quantized matmul of depth K (the
// widened panel of the f32 path or the pair kernel's packing; the larger).
int64_t quant_thread_scratch_bytes(int64_t K, int group);
int64_t quant_gemm_scratch_bytes(int64_t K, int group);
using QuantGemm = void (*)(const QuantMatmulArgs& a, const bf16_t* xb, int64_t n0, int64_t n1, void* scratch);
void quant_gemm_avx512(const QuantMatmulArgs& a, const bf16_t* xb, int64_t n0, int64_t n1, void* scratch);
// The same on AMX-BF16 tiles (only where amx_bf16_available()): a group's
// partial sums of 16 rows × 16 columns are a C tile, scaled into y on AVX-512.
void quant_gemm_amx(const QuantMatmulArgs& a, const bf16_t* xb, int64_t n0, int64_t n1, void* scratch);
// The pieces both share. The panel: columns [n0, n0 + cols) widened in
// scratch, codes as bf16 pairs group after group ([group][pair][column]
// pairs), scales and biases as f32 [group][column].
struct QuantGemmPanel {
  const bf16_t* codes;
  const float* scales;
  const float* biases;
  int64_t n0, cols, groups;
};
QuantGemmPanel quant_gemm_panel(const QuantMatmulArgs& a, int64_t n0, int64_t n1, void* scratch);
// y's rows [m0, m0 + rows) over the panel's columns start at the matmul's bias ...
void quant_gemm_start_rows(const QuantMatmulArgs& a, const QuantGemmPanel& p, int64_t m0, int64_t rows);
// ... and take Σ_g scale_g · (x_g · q_g) + bias_g · Σ x_g, group by group, with
// these terms of group g for the rows from m0 (row i's Σ x_g at sums[i · sums_stride]) ...
struct QuantGroupTerms {
  const float* scale;  // [cols]
  const float* bias;   // [cols]
  const float* sums;
  int64_t sums_stride;
};
QuantGroupTerms quant_gemm_group_terms(const QuantMatmulArgs& a, const QuantGemmPanel& p, int64_t g, int64_t m0);
// ... through the AVX-512 pair kernel.
void quant_gemm_add_rows_avx512(const QuantMatmulArgs& a, const bf16_t* xb, const QuantGemmPanel& p, int64_t m0,
                                int64_t rows);

// One codebook-quantized row widened: out[i] = table[q_i] (table of 2^bits ≤ 16 floats).
using DequantTableRow = void (*)(const uint32_t* codes, int bits, const float* table, int64_t dim, float* out);
void dequant_table_row_reference(const uint32_t* codes, int bits, const float* table, int64_t dim, float* out);
void dequant_table_row_avx512(const uint32_t* codes, int bits, const float* table, int64_t dim, float* out);
DequantTableRow best_dequant_table_row();

// In place over x[0, n): x ← exp(x − max) / Σ, treating x[i] for i outside
// [first, last] as masked (probability 0). The exp is a polynomial accurate to
// a few ulp in the fast version; the reference uses std::exp.
using SoftmaxRow = void (*)(float* x, int64_t n, int64_t first, int64_t last);
void softmax_row_reference(float* x, int64_t n, int64_t first, int64_t last);
void softmax_row_avx512(float* x, int64_t n, int64_t first, int64_t last);

// The greedy pick of a row of logits: the first index of its largest value.
// NaNs are never picked; a row with nothing above −inf picks its first −inf,
// and a row of NaNs picks 0. Backend::pick_rows on every device answers the
// same for a greedy rule.
int32_t argmax(std::span<const float> logits);

// pick_candidates: backend/cpu/pick_candidates.h.

// The token `rule` picks from a row of logits (backend/pick_rule.h): argmax
// for temperature 0; otherwise the first of pick_candidates(logits /
// temperature) whose probabilities, added in walk order, pass rule.uniform.
// The host sampler draws this way (Sampler::sample); Backend::pick_rows on
// every device does too, the CPU's bit for bit.
int32_t pick_token(std::span<const float> logits, const PickRule& rule);

// log Σ_i exp(x[i]) over x[0, n), n ≥ 1: −inf when every x[i] is −inf. The
// server's logprobs take it over a whole vocabulary for every token, so the
// fast version (softmax's exp polynomial, f32 lanes summed into a double every
// block) matters; the reference sums std::exp in double.
using LogSumExp = double (*)(const float* x, int64_t n);
double log_sum_exp_reference(const float* x, int64_t n);
double log_sum_exp_avx512(const float* x, int64_t n);
LogSumExp best_log_sum_exp();

// out[i] = exp(double(x[i] − max)) for x[i] ≤ max, returning Σ out: a
// sampler's softmax weights over a whole vocabulary, in double as its draw
// needs. The fast version's exp is a double polynomial within ~2 ulp of
// std::exp (which the reference calls).
using ExpWeights = double (*)(const float* x, float max, int64_t n, double* out);
double exp_weights_reference(const float* x, float max, int64_t n, double* out);
double exp_weights_avx512(const float* x, float max, int64_t n, double* out);
ExpWeights best_exp_weights();

// out[i] = silu(gate[i]) · up[i] for i in [i0, i1); the reference is
// silu_mul_range (elementwise.h), the fast exp is softmax's polynomial.
using SiluMul = void (*)(const float* gate, const float* up, float* out, int64_t i0, int64_t i1);
void silu_mul_avx512(const float* gate, const float* up, float* out, int64_t i0, int64_t i1);
// The same for gelu_tanh(gate) · up (reference: gelu_tanh_mul_range).
void gelu_tanh_mul_avx512(const float* gate, const float* up, float* out, int64_t i0, int64_t i1);

// Consecutive cached rows of one kv head inside one block: n rows of k and v,
// each [n, d] in the cache's dtype.
struct KvRun {
  const void* k;
  const void* v;
  int64_t n;
};

// Decode attention for one query row and one kv group: out[qi] = softmax(scale ·
// q[qi] · kᵀ) · v over the rows of `count` runs (n rows in all, f32 or bf16),
// queries q [nq, d], out [nq, d]. scratch holds nq · d + min(nq, 8) · n floats.
// With lse (else null), lse[qi] = log Σ_j exp(scale · q[qi] · k_j): a segment
// of a longer row, to be combined with the others (combine_decode_segments).
// The fast version returns false for shapes it does not take (then use the tiles).
using AttendDecode = bool (*)(const float* q, int64_t nq, float scale, const KvRun* runs, int64_t count, DType dtype,
                              int64_t d, int64_t n, float* scratch, float* out, float* lse);
bool attend_decode_reference(const float* q, int64_t nq, float scale, const KvRun* runs, int64_t count, DType dtype,
                             int64_t d, int64_t n, float* scratch, float* out, float* lse);
bool attend_decode_avx512(const float* q, int64_t nq, float scale, const KvRun* runs, int64_t count, DType dtype,
                          int64_t d, int64_t n, float* scratch, float* out, float* lse);

// The kernels of one instruction set.
struct Kernels {
  MatmulSlice matmul;
  GemmNn gemm_nn;
  ToBf16 to_bf16;
  SoftmaxRow softmax_row;
  SiluMul silu_mul;
  SiluMul gelu_tanh_mul;  // same signature
  AttendDecode attend_decode;  // null: decode uses the tiles
  bool bf16_dot;  // matmul multiplies MatmulArgs::xb directly (else x must hold bf16-rounded values)
  // Attention in bf16 compute over bf16 caches rounds the queries and the
  // probabilities to bf16 and multiplies them with the bf16 kernels; null:
  // attention stays in f32 on this processor.
  GemmPv gemm_pv = nullptr;
  GemmQk gemm_qk = nullptr;
  QuantGemm quant_gemm = nullptr;  // null: longer quantized steps widen panels to f32
};
Kernels kernels_for(Isa isa);

// Attention is split into tiles: one kv group (its query heads) × a block of
// query rows. attention_tile_rows says how many rows a tile takes; scratch
// must hold attention_scratch_floats(...) floats per thread. The cache is
// read in place, block by block; coded rows are widened a block at a time.
int64_t attention_tile_rows(int64_t heads, int64_t kv_heads);
// Decode-like rows over plain caches are split by their visible keys into
// segments (whole kDecodeSegmentKeys, at most kDecodeMaxSegments), computed
// apart and combined, so that a few kv heads still spread over every thread.
// The split depends only on the row's span: a verified position is computed
// exactly as decode computes it, on any number of threads.
constexpr int64_t kDecodeSegmentKeys = 256;
constexpr int64_t kDecodeMaxSegments = 16;
// Whether decode-like rows of this view take the segments (the fast decode
// kernel takes its shapes), and how many a row of `span` visible keys has.
bool decode_segments_apply(const Kernels& k, const KvView& kv);
int64_t decode_segments(int64_t span);
// The keys query row t sees (its position, the window).
int64_t visible_span(const KvView& kv, const AttentionParams& p, int64_t t);
// Segment s of row t, kv group g: out [group, d] normalized over the segment,
// lse [group]. scratch as attend_decode's.
void attention_decode_segment(const Kernels& k, const float* q, int64_t heads, const KvView& kv,
                              const AttentionParams& p, int64_t g, int64_t t, int64_t s, float* scratch, float* out,
                              float* lse);
// out[qi] = Σ_s exp(lse_s − lse) · parts_s[qi], parts [segments, nq, d] and
// lses [segments, nq], lse the total; nq rows of d.
void combine_decode_segments(const float* parts, const float* lses, int64_t segments, int64_t nq, int64_t d,
                             float* out);
int64_t attention_scratch_floats(const Kernels& k, const KvView& kv, const AttentionParams& p, int64_t heads,
                                 int64_t rows_in_chunk);
// Steps of at most this many rows (decode, speculative verify) take one
// query row per tile, through decode's path, and no bf16 tiles.
constexpr int64_t kDecodeLikeRows = 16;
// The bf16 part of a tile's scratch (bf16 elements): queries, probabilities
// and a block of values in pairs order.
inline int64_t attention_bf16_tile_elements(int64_t nq, int64_t d, int64_t keys, int64_t block_rows) {
  return nq * d + nq * (keys + 32) + gemm_pv_panel_elements(block_rows, d);
}
void attention_tile(const Kernels& k, const float* q, int64_t heads, const KvView& kv, const AttentionParams& p,
                    int64_t g, int64_t t0, int64_t t1, float* scratch, float* out);
// Row j of the view (head `head`, K or V) widened to f32: out [head_dim].
void read_kv_row(const KvView& kv, bool values, int64_t head, int64_t j, float* out);
// The plain reference for query rows [t0, t1), every head.
void attention_rows_reference(const float* q, int64_t heads, const KvView& kv, const AttentionParams& p,
                              int64_t t0, int64_t t1, float* out);

}  // namespace fathom::cpu
