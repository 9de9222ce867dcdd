#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace fathom {
namespace {

double yarn_mscale(double scale, double mscale = 1.0) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// Dimension index at which a wavelength completes `rotations` turns over the original context.
double yarn_correction_dim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

}  // namespace

RopeTable::RopeTable(const RopeConfig& rope, int64_t head_dim, int64_t max_position_embeddings) {
  if (rope.type == "proportional") {
    init_proportional(rope, head_dim);
    return;
  }
  const int64_t dim = int64_t(double(head_dim) * rope.partial_rotary_factor);
  check(dim >= 2 && dim % 2 == 0, "rope: rotary dim ", dim, " must be even and positive");
  const int64_t half = dim / 2;
  std::vector<float> base_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    base_freq[i] = float(1.0 / std::pow(rope.theta, double(2 * i) / double(dim)));

  inv_freq_ = base_freq;
  if (rope.type == "linear") {
    for (auto& f : inv_freq_) f = float(f / *rope.factor);
  } else if (rope.type == "llama3") {
    const double factor = *rope.factor;
    const double old_context = double(rope.original_max_position_embeddings.value_or(max_position_embeddings));
    const double low_wavelen = old_context / rope.low_freq_factor;
    const double high_wavelen = old_context / rope.high_freq_factor;
    for (auto& f : inv_freq_) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = float(f / factor);
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_context / wavelen - rope.low_freq_factor) /
                              (rope.high_freq_factor - rope.low_freq_factor);
        f = float((1.0 - smooth) * f / factor + smooth * f);
      }
    }
  } else if (rope.type == "yarn") {
    const double original = double(rope.original_max_position_embeddings.value_or(max_position_embeddings));
    const double factor = rope.factor.value_or(double(max_position_embeddings) / original);
    if (rope.attention_factor) {
      attention_scaling_ = float(*rope.attention_factor);
    } else if (rope.mscale && rope.mscale_all_dim && *rope.mscale != 0 && *rope.mscale_all_dim != 0) {
      attention_scaling_ = float(yarn_mscale(factor, *rope.mscale) / yarn_mscale(factor, *rope.mscale_all_dim));
    } else {
      attention_scaling_ = float(yarn_mscale(factor));
    }
    double low = yarn_correction_dim(rope.beta_fast, double(dim), rope.theta, original);
    double high = yarn_correction_dim(rope.beta_slow, double(dim), rope.theta, original);
    if (rope.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, double(dim - 1));
    if (low == high) high += 0.001;  // avoid a zero-width ramp
    for (int64_t i = 0; i < half; ++i) {
      const float ramp = float(std::clamp((double(i) - low) / (high - low), 0.0, 1.0));
      const float extrapolation = 1.0f - ramp;
      const float interpolated = float(base_freq[i] / factor);
      inv_freq_[i] = interpolated * (1.0f - extrapolation) + base_freq[i] * extrapolation;
    }
  }
}

// Gemma 4's global layers: the table spans the whole head_dim (pairs i and
// i + head_dim / 2 rotate together), but only the first
// partial_rotary_factor of the frequencies are non-zero, with exponents taken
// over head_dim rather than over the rotated part; the rest leave their
// features as they are (cos 1, sin 0).
void RopeTable::init_proportional(const RopeConfig& rope, int64_t head_dim) {
  check(head_dim >= 2 && head_dim % 2 == 0, "rope (proportional): head_dim ", head_dim, " must be even and positive");
  check(rope.partial_rotary_factor >= 0.0 && rope.partial_rotary_factor <= 1.0, "rope (proportional): partial_rotary_factor ",
        rope.partial_rotary_factor, " must be in [0, 1]");
  const int64_t half = head_dim / 2;
  // transformers: int(factor * head_dim // 2), a floor of the real product.
  const int64_t rotated = std::min(half, int64_t(std::floor(rope.partial_rotary_factor * double(head_dim) / 2.0)));
  const double factor = rope.factor.value_or(1.0);
  check(factor > 0.0, "rope (proportional): factor ", factor, " must be positive");
  inv_freq_.assign(static_cast<size_t>(half), 0.0f);
  for (int64_t i = 0; i < rotated; ++i)
    inv_freq_[i] = float(float(1.0 / std::pow(rope.theta, double(2 * i) / double(head_dim))) / factor);
}

void RopeTable::fill(int64_t first_position, int64_t count, Tensor& cos, Tensor& sin) const {
  const int64_t h = half();
  check(cos.numel() >= count * h && sin.numel() >= count * h, "rope fill: tables too small");
  for (int64_t t = 0; t < count; ++t) {
    const float pos = float(first_position + t);
    for (int64_t i = 0; i < h; ++i) {
      const float angle = inv_freq_[i] * pos;  // f32 product, as transformers forms it
      cos.data<float>()[t * h + i] = float(std::cos(double(angle))) * attention_scaling_;
      sin.data<float>()[t * h + i] = float(std::sin(double(angle))) * attention_scaling_;
    }
  }
}

RopeTable::Tables RopeTable::tables(Backend& b, const StepLayout& layout) const {
  Tensor cos = Tensor::empty({layout.rows(), half()}, DType::f32);
  Tensor sin = Tensor::empty({layout.rows(), half()}, DType::f32);
  fill(layout, cos, sin);
  return {b.upload(cos), b.upload(sin)};
}

void RopeTable::fill(const StepLayout& layout, Tensor& cos, Tensor& sin) const {
  for (const auto& segment : layout.segments) {
    Tensor c = cos.slice_rows(segment.row, segment.row + segment.rows);
    Tensor s = sin.slice_rows(segment.row, segment.row + segment.rows);
    fill(segment.first_position, segment.rows, c, s);
  }
}

}  // namespace fathom
