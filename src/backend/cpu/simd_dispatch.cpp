#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "backend/cpu/elementwise.h"
#include "backend/cpu/kernels.h"

namespace fathom::cpu {

Isa detect_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512bf16"))
    return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
#endif
  return Isa::portable;
}

bool amx_bf16_available() {
  static const bool available = [] {
    const char* env = std::getenv("FATHOM_AMX");
    if (env && std::strcmp(env, "0") == 0) return false;
#if defined(__x86_64__)
    if (detect_isa() != Isa::avx512) return false;  // the kernel's edges take the AVX-512 paths
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = edx & (1u << 22), amx_tile = edx & (1u << 24);
    if (!amx_bf16 || !amx_tile) return false;
    // Linux gives a process the tile data state only when asked.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return available;
}

bool avx512_vbmi_available() {
#if defined(__x86_64__)
  static const bool available = [] {
    __builtin_cpu_init();
    return detect_isa() == Isa::avx512 && __builtin_cpu_supports("avx512vbmi");
  }();
  return available;
#else
  return false;
#endif
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::portable: return "portable";
  }
  return "?";
}

Kernels kernels_for(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return {matmul_slice_avx512, gemm_nn_avx512,       to_bf16_avx512,       softmax_row_avx512,
              silu_mul_avx512,     gelu_tanh_mul_avx512, attend_decode_avx512, true, gemm_pv_avx512, gemm_qk_avx512,
              quant_gemm_avx512};
    case Isa::avx2:
      return {matmul_slice_avx2, gemm_nn_avx2,        to_bf16_reference, softmax_row_reference,
              silu_mul_range,    gelu_tanh_mul_range, nullptr,           false};
    case Isa::portable: break;
  }
  return {matmul_slice_reference, gemm_nn_reference,   to_bf16_reference, softmax_row_reference,
          silu_mul_range,         gelu_tanh_mul_range, nullptr,           false};
}

LogSumExp best_log_sum_exp() {
  static const LogSumExp best = detect_isa() == Isa::avx512 ? log_sum_exp_avx512 : log_sum_exp_reference;
  return best;
}

ExpWeights best_exp_weights() {
  static const ExpWeights best = detect_isa() == Isa::avx512 ? exp_weights_avx512 : exp_weights_reference;
  return best;
}

DequantAffineRow best_dequant_affine_row() {
  static const DequantAffineRow best =
      detect_isa() == Isa::avx512 ? dequant_affine_row_avx512 : dequant_affine_row_reference;
  return best;
}

DequantTableRow best_dequant_table_row() {
  static const DequantTableRow best =
      detect_isa() == Isa::avx512 ? dequant_table_row_avx512 : dequant_table_row_reference;
  return best;
}

}  // namespace fathom::cpu
