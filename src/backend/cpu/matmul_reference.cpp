#include "backend/cpu/kernels.h"

namespace fathom::cpu {

void matmul_slice_reference(const MatmulArgs& a, int64_t n0, int64_t n1) {
  for (int64_t m = 0; m < a.M; ++m) {
    const float* x = a.x + m * a.K;
    for (int64_t n = n0; n < n1; ++n) {
      double sum = 0.0;
      if (a.w_dtype == DType::bf16) {
        const bf16_t* w = static_cast<const bf16_t*>(a.w) + n * a.K;
        for (int64_t k = 0; k < a.K; ++k) sum += double(x[k]) * double(bf16_to_f32(w[k]));
      } else {
        const float* w = static_cast<const float*>(a.w) + n * a.K;
        for (int64_t k = 0; k < a.K; ++k) sum += double(x[k]) * double(w[k]);
      }
      a.y[m * a.N + n] = float(sum) + (a.bias ? a.bias[n] : 0.0f);
    }
  }
}

}  // namespace fathom::cpu
