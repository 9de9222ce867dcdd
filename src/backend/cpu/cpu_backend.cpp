// The CPU backend's matmul, norm, activation, embedding and attention ops.
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "core/error.h"

namespace fathom {
namespace cpu {

CpuBackend::CpuBackend()
    : pool_(ThreadPool::global()), isa_(detect_isa()), amx_(amx_bf16_available()), kernels_(kernels_for(isa_)) {
  if (amx_) {
    kernels_.matmul = matmul_slice_amx;
    kernels_.gemm_pv = gemm_pv_amx;
    kernels_.gemm_qk = gemm_qk_amx;
    kernels_.quant_gemm = quant_gemm_amx;
  }
}

void CpuBackend::matmul_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool bf16_inputs) {
  const MatmulTarget target{&w, bias, &y};
  matmul_shared_impl(x, {&target, 1}, bf16_inputs);
}

void CpuBackend::matmul_shared_impl(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs) {
  const auto affine = [](const MatmulTarget& t) { return t.w->dtype() == DType::affine; };
  if (std::any_of(targets.begin(), targets.end(), affine)) {
    std::vector<MatmulTarget> quantized, plain;
    for (const MatmulTarget& t : targets) (affine(t) ? quantized : plain).push_back(t);
    quant_matmul(x, quantized, bf16_inputs);
    if (!plain.empty()) matmul_shared_impl(x, plain, bf16_inputs);
    return;
  }
  MatmulArgs base;
  base.M = x.dim(0);
  base.K = x.dim(1);
  base.x = x.data<float>();
  const float* rounded = nullptr;  // x rounded to bf16 values, as f32
  if (bf16_inputs) {
    // Kernels without a bf16 dot product multiply the rounded values widened
    // back to f32, which gives the same products; so do f32 weights on every
    // kernel (the bf16 dot product needs bf16 weights).
    bool widen = !kernels_.bf16_dot;
    for (const auto& t : targets) widen = widen || t.w->dtype() != DType::bf16;
    base.xb = round_inputs(x, widen ? &rounded : nullptr);
    if (!kernels_.bf16_dot) base.x = rounded;
  }
  // The outputs side by side: one split of their total N across threads.
  std::vector<MatmulArgs> args;
  std::vector<int64_t> first_column;
  int64_t total = 0;
  for (const auto& t : targets) {
    MatmulArgs a = base;
    a.N = t.w->dim(0);
    a.w = t.w->raw();
    a.w_dtype = t.w->dtype();
    if (rounded && a.w_dtype != DType::bf16) a.x = rounded;
    a.bias = t.bias ? t.bias->data<float>() : nullptr;
    a.y = t.y->data<float>();
    args.push_back(a);
    first_column.push_back(total);
    total += a.N;
  }
  auto slice = kernels_.matmul;
  pool_.parallel_for(total, 16, [&](int64_t n0, int64_t n1) {
    for (size_t i = 0; i < args.size(); ++i) {
      const int64_t lo = std::max(n0, first_column[i]), hi = std::min(n1, first_column[i] + args[i].N);
      if (lo < hi) slice(args[i], lo - first_column[i], hi - first_column[i]);
    }
  });
}

const bf16_t* CpuBackend::round_inputs(const Tensor& x, const float** widened) {
  const int64_t n = x.numel();
  const float* src = x.data<float>();
  bf16_t* xb = grow(rounded_bf16_, n, DType::bf16).data<bf16_t>();
  float* wide = widened ? grow(rounded_, n, DType::f32).data<float>() : nullptr;
  small_parallel_for(n, 64, [&](int64_t i0, int64_t i1) {
    kernels_.to_bf16(src + i0, i1 - i0, xb + i0);
    if (wide)
      for (int64_t i = i0; i < i1; ++i) wide[i] = bf16_to_f32(xb[i]);
  });
  if (widened) *widened = wide;
  return xb;
}

void CpuBackend::rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
  const int64_t d = w.numel();
  small_parallel_for(x.numel(), d, [&](int64_t i0, int64_t i1) {
    const int64_t r0 = i0 / d, r1 = i1 / d;
    rms_norm_rows(x.data<float>(), w.data<float>(), eps, d, r0, r1, y.data<float>());
  });
}

void CpuBackend::rope_impl(Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t t = x.dim(0);
  auto body = [&](int64_t t0, int64_t t1) {
    rope_rows(x.data<float>(), cos.data<float>(), sin.data<float>(), x.dim(1), x.dim(2), cos.dim(1), t0, t1);
  };
  if (t == 1) body(0, 1);  // one token: not worth waking the pool
  else pool_.parallel_for(t, 1, body);
}

void CpuBackend::silu_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) {
  small_parallel_for(gate.numel(), 64, [&](int64_t i0, int64_t i1) {
    kernels_.silu_mul(gate.data<float>(), up.data<float>(), out.data<float>(), i0, i1);
  });
}

void CpuBackend::gelu_tanh_mul_impl(const Tensor& gate, const Tensor& up, Tensor& out) {
  small_parallel_for(gate.numel(), 64, [&](int64_t i0, int64_t i1) {
    kernels_.gelu_tanh_mul(gate.data<float>(), up.data<float>(), out.data<float>(), i0, i1);
  });
}

void CpuBackend::add_inplace_impl(Tensor& x, const Tensor& y) { add_range(x.data<float>(), y.data<float>(), 0, x.numel()); }

void CpuBackend::embedding_impl(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out) {
  const int64_t d = table.dim(1);
  if (table.dtype() == DType::affine) {
    const AffineQuant& q = table.affine_quant();
    const int64_t words = d * q.bits / 32, groups = d / q.group_size;
    const size_t param_bytes = dtype_size(q.scales.dtype());
    static const DequantAffineRow dequant = best_dequant_affine_row();
    for (size_t i = 0; i < ids.size(); ++i)
      dequant(table.data<uint32_t>() + ids[i] * words,
              static_cast<const char*>(q.scales.raw()) + size_t(ids[i] * groups) * param_bytes,
              static_cast<const char*>(q.biases.raw()) + size_t(ids[i] * groups) * param_bytes, q.scales.dtype(),
              q.bits, q.group_size, d, out.data<float>() + int64_t(i) * d);
    return;
  }
  const size_t row_bytes = size_t(d) * dtype_size(table.dtype());
  for (size_t i = 0; i < ids.size(); ++i)
    widen_row(static_cast<const char*>(table.raw()) + size_t(ids[i]) * row_bytes, table.dtype(), d,
              out.data<float>() + int64_t(i) * d);
}

const HadamardRotation& CpuBackend::rotation(const KvView& kv) {
  auto& r = rotations_[{kv.rotation_seed, kv.head_dim()}];
  if (!r) r = std::make_unique<HadamardRotation>(kv.head_dim(), kv.rotation_seed);
  return *r;
}

void CpuBackend::attention_impl(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p,
                                Tensor& out) {
  attend_each_segment(q, segments, p, out, [this](const Tensor& qs, const KvView& kv, const AttentionParams& at,
                                                  Tensor& rows) { attend_view(qs, kv, at, rows); });
}

void CpuBackend::attend_view(const Tensor& q_in, const KvView& kv, const AttentionParams& p, Tensor& out) {
  const int64_t t = q_in.dim(0), heads = q_in.dim(1), d = kv.head_dim();
  // A codebook cache holds rotated rows: scores are taken in the rotated
  // space (Rq·Rk = q·k) and the output is rotated back once.
  const HadamardRotation* rot = kv.format.codec == KvFormat::Codec::codebook ? &rotation(kv) : nullptr;
  const float* q = q_in.data<float>();
  if (rot) {
    float* rq = grow(rotated_, q_in.numel(), DType::f32).data<float>();
    std::copy_n(q, q_in.numel(), rq);
    for (int64_t r = 0; r < q_in.numel() / d; ++r) rot->apply(rq + r * d);
    q = rq;
  }
  const int threads = pool_.size();
  scratch_.resize(size_t(threads));
  for (auto& s : scratch_) grow(s, attention_scratch_floats(kernels_, kv, p, heads, t), DType::f32);
  // A few rows (a speculative verify step) go one query row per tile, each
  // through decode's path: a verified position sees what decode would give it.
  const int64_t rows = t <= kDecodeLikeRows ? 1 : attention_tile_rows(heads, kv.kv_heads());
  if (rows == 1 && decode_segments_apply(kernels_, kv)) return attend_decode_segments(q, kv, p, out, heads);
  const int64_t row_blocks = (t + rows - 1) / rows;
  const int64_t tiles = row_blocks * kv.kv_heads();
  // Tiles are dealt round-robin: causal rows get costlier down the chunk,
  // so contiguous ranges would leave one thread with most of the work.
  pool_.run([&](int thread, int count) {
    for (int64_t i = thread; i < tiles; i += count) {
      const int64_t block = i / kv.kv_heads(), g = i % kv.kv_heads();
      const int64_t t0 = block * rows, t1 = std::min(t, t0 + rows);
      attention_tile(kernels_, q, heads, kv, p, g, t0, t1, scratch_[thread].data<float>(), out.data<float>());
    }
  });
  if (rot)
    for (int64_t r = 0; r < out.numel() / d; ++r) rot->apply_inverse(out.data<float>() + r * d);
}

void CpuBackend::attend_decode_segments(const float* q, const KvView& kv, const AttentionParams& p, Tensor& out,
                                        int64_t heads) {
  const int64_t t = out.dim(0), kv_heads = kv.kv_heads(), group = heads / kv_heads, d = kv.head_dim();
  // Item i is segment s of row r, kv group g; row r's items start at first[r], g-major.
  std::vector<int64_t> segments(static_cast<size_t>(t)), first(static_cast<size_t>(t) + 1, 0);
  for (int64_t r = 0; r < t; ++r) {
    segments[size_t(r)] = decode_segments(visible_span(kv, p, r));
    first[size_t(r) + 1] = first[size_t(r)] + kv_heads * segments[size_t(r)];
  }
  const int64_t items = first[size_t(t)];
  // A row of one segment (short contexts) writes its output in place; the
  // others go through parts and log-sum-exps, combined in a second pass.
  const bool split = items > t * kv_heads;
  float* parts = split ? grow(decode_parts_, items * group * d, DType::f32).data<float>() : nullptr;
  float* lses = split ? grow(decode_lses_, items * group, DType::f32).data<float>() : nullptr;
  auto out_of = [&](int64_t r, int64_t g) { return out.data<float>() + (r * heads + g * group) * d; };
  pool_.run([&](int thread, int count) {
    int64_t r = 0;
    for (int64_t i = thread; i < items; i += count) {
      while (first[size_t(r) + 1] <= i) ++r;
      const int64_t within = i - first[size_t(r)], g = within / segments[size_t(r)], s = within % segments[size_t(r)];
      const bool alone = segments[size_t(r)] == 1;
      attention_decode_segment(kernels_, q, heads, kv, p, g, r, s, scratch_[thread].data<float>(),
                               alone ? out_of(r, g) : parts + i * group * d, alone ? nullptr : lses + i * group);
    }
  });
  if (!split) return;
  pool_.run([&](int thread, int count) {
    for (int64_t i = thread; i < t * kv_heads; i += count) {
      const int64_t r = i / kv_heads, g = i % kv_heads, at = first[size_t(r)] + g * segments[size_t(r)];
      if (segments[size_t(r)] > 1)
        combine_decode_segments(parts + at * group * d, lses + at * group, segments[size_t(r)], group, d, out_of(r, g));
    }
  });
}

}  // namespace cpu

std::shared_ptr<Backend> make_cpu_backend() { return std::make_shared<cpu::CpuBackend>(); }

}  // namespace fathom
