// The CPU backend's memory ops (host memory: upload and download share the
// tensor) and its KV row codecs: rows are encoded into blocks as they are
// written and widened back for a delayed quantization start.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/affine_codec.h"
#include "backend/cpu/cpu_backend.h"

namespace fathom::cpu {

Tensor CpuBackend::empty_impl(std::vector<int64_t> shape, DType dtype) { return Tensor::empty(std::move(shape), dtype); }

Tensor CpuBackend::reserve_impl(std::vector<int64_t> shape, DType dtype) {
  return Tensor::reserve(std::move(shape), dtype);
}

void CpuBackend::release_pages(void* data, int64_t bytes) {
  // Only the whole pages inside the range: its neighbours may be in use.
  constexpr uintptr_t kPage = 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kPage - 1) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + uintptr_t(bytes)) & ~(kPage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void CpuBackend::copy_impl(const Tensor& src, Tensor& dst) {
  if (src.raw() != dst.raw()) std::memmove(dst.raw(), src.raw(), src.nbytes());
}

void CpuBackend::fill_impl(Tensor& x, float value) { std::fill_n(x.data<float>(), x.numel(), value); }

namespace {

void encode_row(const KvView& kv, const HadamardRotation* rotation, bool values, int64_t head, int64_t j,
                const float* x, std::vector<float>& buffer) {
  const KvFormat& f = kv.format;
  std::byte* block = kv.block_of(j);
  const int64_t r = kv.row_in_block(j);
  std::byte* dst = block + f.rows_offset(values, head) + r * f.row_bytes(values);
  switch (f.codec) {
    case KvFormat::Codec::plain:
      if (f.dtype == DType::f32) {
        std::memcpy(dst, x, size_t(f.head_dim) * 4);
      } else {
        auto* out = reinterpret_cast<bf16_t*>(dst);
        for (int64_t i = 0; i < f.head_dim; ++i) out[i] = f32_to_bf16(x[i]);
      }
      return;
    case KvFormat::Codec::affine: {
      const int64_t groups = f.groups();
      affine_quantize_row(x, {values ? f.v_bits : f.k_bits, f.group_size, f.head_dim},
                          reinterpret_cast<uint32_t*>(dst),
                          reinterpret_cast<bf16_t*>(block + f.scales_offset(values, head)) + r * groups,
                          reinterpret_cast<bf16_t*>(block + f.biases_offset(values, head)) + r * groups);
      return;
    }
    case KvFormat::Codec::codebook:
      buffer.assign(x, x + f.head_dim);
      rotation->apply(buffer.data());
      turbo_quantize_row(buffer.data(), f.head_dim, lloyd_max_codebook(values ? f.v_bits : f.k_bits),
                         reinterpret_cast<uint32_t*>(dst),
                         reinterpret_cast<float*>(block + f.scales_offset(values, head)) + r);
      return;
  }
}

}  // namespace

void CpuBackend::kv_write_impl(std::span<const KvSegment> segments, const Tensor& k, const Tensor& v) {
  thread_local std::vector<float> buffer;  // a codebook row, rotated: reused across writes
  for (const KvSegment& s : segments) {
    const KvView& kv = s.kv;
    const int64_t heads = kv.kv_heads(), d = kv.head_dim(), row = s.first_position - kv.first_position;
    const HadamardRotation* rot = kv.format.codec == KvFormat::Codec::codebook ? &rotation(kv) : nullptr;
    for (int64_t t = 0; t < s.rows; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t src = ((s.row + t) * heads + h) * d;
        encode_row(kv, rot, false, h, row + t, k.data<float>() + src, buffer);
        encode_row(kv, rot, true, h, row + t, v.data<float>() + src, buffer);
      }
  }
}

void CpuBackend::kv_read_impl(const KvView& kv, int64_t row, Tensor& k, Tensor& v) {
  const int64_t heads = kv.kv_heads(), d = kv.head_dim();
  const HadamardRotation* rot = kv.format.codec == KvFormat::Codec::codebook ? &rotation(kv) : nullptr;
  for (int64_t t = 0; t < k.dim(0); ++t)
    for (int which = 0; which < 2; ++which)
      for (int64_t h = 0; h < heads; ++h) {
        float* dst = (which ? v : k).data<float>() + (t * heads + h) * d;
        read_kv_row(kv, which == 1, h, row + t, dst);
        if (rot) rot->apply_inverse(dst);
      }
}

}  // namespace fathom::cpu
