#pragma once
// Rotary position embedding tables for the default, linear, llama3, yarn and
// proportional (Gemma 4) variants, computed the way transformers computes them (f32 inverse
// frequencies, cos/sin scaled by the variant's attention factor).
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "io/model_config.h"
#include "model/step.h"

namespace fathom {

class RopeTable {
 public:
  RopeTable(const RopeConfig& rope, int64_t head_dim, int64_t max_position_embeddings);

  int64_t half() const { return int64_t(inv_freq_.size()); }
  float attention_scaling() const { return attention_scaling_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  // cos, sin [count, half] for positions first_position … first_position + count - 1.
  void fill(int64_t first_position, int64_t count, Tensor& cos, Tensor& sin) const;
  // Every row of a step at its own sequence's position.
  void fill(const StepLayout& layout, Tensor& cos, Tensor& sin) const;
  // cos, sin [rows, half] for a step, filled on the host and uploaded to the backend.
  struct Tables {
    Tensor cos, sin;
  };
  Tables tables(Backend& b, const StepLayout& layout) const;

 private:
  void init_proportional(const RopeConfig& rope, int64_t head_dim);

  std::vector<float> inv_freq_;
  float attention_scaling_ = 1.0f;
};

}  // namespace fathom
