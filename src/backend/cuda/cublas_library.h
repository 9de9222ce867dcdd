// cuBLAS, loaded when the first CUDA backend is made rather than when the
// process starts. libcublasLt's static constructors take ~0.4 s and ~200 MB
// of resident memory: linked directly, every run of a CUDA build paid that,
// the CPU ones included (and their memory contract with it).
#pragma once

#include <cublas_v2.h>

namespace fathom::cuda {

// The entry points the backend calls, resolved from the shared library.
struct CublasLibrary {
  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  decltype(&::cublasSetStream_v2) set_stream;
  decltype(&::cublasSetMathMode) set_math_mode;
  decltype(&::cublasSetWorkspace_v2) set_workspace;
  // Spelled out: in C++ the header overloads cublasGemmEx (a cudaDataType
  // computeType form), so decltype cannot name the C entry point.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                            const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                            cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
};

// The entry point's type agrees with the header's C declaration (the cast
// picks the overload of that type, and fails to compile without one).
static_assert(sizeof(static_cast<decltype(CublasLibrary::gemm_ex)>(&::cublasGemmEx)) > 0);

// Loads libcublas.so.<the major version built against> once (thread-safe)
// and resolves every entry point; an error naming the library and symbol
// where that fails.
const CublasLibrary& cublas_library();

}  // namespace fathom::cuda
