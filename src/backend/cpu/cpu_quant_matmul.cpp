// Matmuls over affine-quantized weights on the CPU. The weight is never
// widened as a whole: decode and verify steps (a few rows of x) multiply the
// packed codes directly (quant_gemv); longer bf16 steps multiply the codes'
// exact bf16 values group by group (quant_gemm, on AMX tiles where the
// processor has them); the rest (longer f32 steps, processors without
// AVX-512) dequantize a panel of weight rows at a time into per-thread f32
// scratch and run the blocked f32 matmul on it, so a prefill chunk reuses
// each widened panel for all its rows.
// Either way W is scale·q + bias in f32, never rounded to bf16; bf16 compute
// rounds x, as it does for every matmul.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"

namespace fathom::cpu {
namespace {

constexpr int64_t kPanelBytes = 128 << 10;  // one thread's widened weight rows: L2-resident

int64_t panel_rows(int64_t K) {
  return std::clamp<int64_t>(kPanelBytes / (K * int64_t(sizeof(float))) / 16 * 16, 16, 64);
}

}  // namespace

int64_t quant_thread_scratch_bytes(int64_t K, int group) {
  const int64_t bytes = std::max(panel_rows(K) * K * int64_t(sizeof(float)), quant_gemm_scratch_bytes(K, group));
  return (bytes + 3) / 4 * 4;
}

void CpuBackend::quant_matmul(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs) {
  const int64_t M = x.dim(0), K = x.dim(1);
  // x as every target multiplies it, made once for all of them (q/k/v and
  // gate/up share one x): rounded to bf16 values, and in bf16.
  const float* x_values = x.data<float>();
  const bf16_t* xb = bf16_inputs ? round_inputs(x, &x_values) : nullptr;
  // The group sums and the GEMV's reordered x depend on the group size and
  // the code width: made again only when a target's differ from the last.
  int sums_group = 0, planes_bits = 0;
  for (const MatmulTarget& t : targets) {
    const AffineQuant& q = t.w->affine_quant();
    QuantMatmulArgs a;
    a.M = M;
    a.K = K;
    a.N = t.w->dim(0);
    a.codes = t.w->data<uint32_t>();
    a.scales = q.scales.raw();
    a.biases = q.biases.raw();
    a.params = q.scales.dtype();
    a.bits = q.bits;
    a.group = q.group_size;
    a.bias = t.bias ? t.bias->data<float>() : nullptr;
    a.y = t.y->data<float>();
    a.x = x_values;
    if (quant_sums_.defined() && sums_group == a.group) a.x_group_sums = quant_sums_.data<float>();
    if (quant_planes_.defined() && planes_bits == a.bits) a.x_planes = quant_planes_.raw();
    quant_matmul_one(a, xb, bf16_inputs);
    sums_group = a.x_group_sums ? a.group : 0;
    planes_bits = a.x_planes ? a.bits : 0;
  }
}

void CpuBackend::quant_matmul_one(QuantMatmulArgs& a, const bf16_t* xb, bool bf16_inputs) {
  const bool gemv = a.M <= kGemvMaxRows && isa_ == Isa::avx512;
  // Longer bf16 steps multiply the codes themselves (exact in bf16) group by group.
  const bool pair_gemm = !gemv && a.M > kGemvMaxRows && bf16_inputs && kernels_.quant_gemm;
  const int64_t groups = a.K / a.group;
  if ((gemv || pair_gemm) && !a.x_group_sums) {
    float* sums = grow(quant_sums_, a.M * groups, DType::f32).data<float>();
    small_parallel_for(a.M * groups, 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float s = 0.0f;
        for (int64_t k = 0; k < a.group; ++k) s += a.x[i * a.group + k];
        sums[i] = s;
      }
    });
    a.x_group_sums = sums;
  }
  if (gemv) {
    // bf16 compute multiplies bf16 x by the codes' bf16 values (exact small
    // integers) in pairs; f32 compute widens the codes to f32.
    a.bf16_planes = bf16_inputs;
    if (!quant_gemv_planes_take(a.bits, a.K)) {
      a.x_planes = nullptr;
      a.xb = xb;
    } else if (!a.x_planes) {
      const int64_t plane_elements = a.M * quant_gemv_plane_elements(a.bits, a.K, bf16_inputs);
      Tensor& planes = grow(quant_planes_, plane_elements * (bf16_inputs ? 2 : 4) / 4, DType::f32);
      quant_gemv_planes(a.x, a.M, a.K, a.bits, bf16_inputs, planes.raw());
      a.x_planes = planes.raw();
    }
    pool_.parallel_for(a.N, 16, [&](int64_t n0, int64_t n1) { quant_gemv_avx512(a, n0, n1); });
    return;
  }

  const int threads = pool_.size();
  quant_panels_.resize(size_t(threads));
  const int64_t rows = panel_rows(a.K);
  for (auto& p : quant_panels_) grow(p, quant_thread_scratch_bytes(a.K, a.group) / 4, DType::f32);
  int64_t first_plain = 0;  // columns before this one went through the pair kernel
  if (pair_gemm) {
    first_plain = a.N / 16 * 16;
    const int64_t panels = (first_plain + kQuantGemmCols - 1) / kQuantGemmCols;
    pool_.run([&](int thread, int count) {
      for (int64_t p = thread; p < panels; p += count)
        kernels_.quant_gemm(a, xb, p * kQuantGemmCols, std::min(first_plain, (p + 1) * kQuantGemmCols),
                            quant_panels_[size_t(thread)].raw());
    });
    if (first_plain == a.N) return;
  }

  // Panels of weight rows widened to f32, dealt round-robin to the threads.
  const int64_t panels = (a.N - first_plain + rows - 1) / rows;
  const int64_t words = a.K * a.bits / 32;
  const size_t param_bytes = dtype_size(a.params);
  static const DequantAffineRow dequant = best_dequant_affine_row();
  pool_.run([&](int thread, int count) {
    float* panel = quant_panels_[size_t(thread)].data<float>();
    for (int64_t p = thread; p < panels; p += count) {
      const int64_t n0 = first_plain + p * rows, n1 = std::min(a.N, n0 + rows);
      for (int64_t n = n0; n < n1; ++n)
        dequant(a.codes + n * words, static_cast<const char*>(a.scales) + size_t(n * groups) * param_bytes,
                static_cast<const char*>(a.biases) + size_t(n * groups) * param_bytes, a.params, a.bits, a.group,
                a.K, panel + (n - n0) * a.K);
      // Output columns [n0, n1) through the f32 kernel: y and bias offset by
      // n0, the row stride still N.
      MatmulArgs m;
      m.x = a.x;
      m.w = panel;
      m.w_dtype = DType::f32;
      m.bias = a.bias ? a.bias + n0 : nullptr;
      m.y = a.y + n0;
      m.M = a.M;
      m.N = a.N;
      m.K = a.K;
      kernels_.matmul(m, 0, n1 - n0);
    }
  });
}

}  // namespace fathom::cpu
