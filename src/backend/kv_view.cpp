#include "backend/kv_view.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {
namespace {

constexpr int64_t kRegionAlign = 64;
int64_t aligned(int64_t bytes) { return (bytes + kRegionAlign - 1) / kRegionAlign * kRegionAlign; }

}  // namespace

int64_t KvFormat::row_bytes(bool values) const {
  if (codec == Codec::plain) return head_dim * int64_t(dtype_size(dtype));
  const int bits = values ? v_bits : k_bits;
  return (head_dim * bits + 31) / 32 * 4;
}

// Bytes of one row's parameters in each parameter region.
static int64_t param_bytes(const KvFormat& f) {
  switch (f.codec) {
    case KvFormat::Codec::plain: return 0;
    case KvFormat::Codec::affine: return f.groups() * 2;
    case KvFormat::Codec::codebook: return 4;
  }
  return 0;
}

int64_t KvFormat::rows_offset(bool values, int64_t head) const {
  const int64_t k_region = aligned(kv_heads * block_rows * row_bytes(false));
  return (values ? k_region : 0) + head * block_rows * row_bytes(values);
}

int64_t KvFormat::scales_offset(bool values, int64_t head) const {
  const int64_t params = aligned(kv_heads * block_rows * param_bytes(*this));
  const int64_t base = aligned(kv_heads * block_rows * row_bytes(false)) +
                       aligned(kv_heads * block_rows * row_bytes(true));
  return base + (values ? params : 0) + head * block_rows * param_bytes(*this);
}

int64_t KvFormat::biases_offset(bool values, int64_t head) const {
  check(codec == Codec::affine, "kv format: only affine rows have biases");
  const int64_t params = aligned(kv_heads * block_rows * param_bytes(*this));
  return scales_offset(values, head) + 2 * params;
}

int64_t KvFormat::bytes() const {
  const int64_t rows = aligned(kv_heads * block_rows * row_bytes(false)) +
                       aligned(kv_heads * block_rows * row_bytes(true));
  const int64_t regions = codec == Codec::affine ? 4 : codec == Codec::codebook ? 2 : 0;
  return rows + regions * aligned(kv_heads * block_rows * param_bytes(*this));
}

int64_t KvFormat::token_bytes() const {
  const int64_t regions = codec == Codec::affine ? 4 : codec == Codec::codebook ? 2 : 0;
  return kv_heads * (row_bytes(false) + row_bytes(true) + regions * param_bytes(*this));
}

KvFormat KvFormat::fitted_to(int64_t block_bytes) const {
  check(kv_heads > 0 && head_dim > 0, "kv format: ", kv_heads, " heads of dim ", head_dim);
  KvFormat f = *this;
  f.block_rows = std::max<int64_t>(1, block_bytes / token_bytes());
  // Alignment padding may push the estimate over; step down until it fits.
  while (f.block_rows > 1 && f.bytes() > block_bytes) --f.block_rows;
  check(f.bytes() <= block_bytes, "kv format: one row of ", f.bytes(), " bytes does not fit a block of ",
        block_bytes);
  return f;
}

}  // namespace fathom
