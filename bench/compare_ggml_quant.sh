#!/usr/bin/env bash
# Builds ggml (the tensor library under llama.cpp) from a source tree and the
# side-by-side harness bench/ggml_quant_matmul.cpp against build/libfathom_core.a,
# then runs it at each thread count. ggml is configured as llama.cpp configures it
# (native, llamafile's sgemm, OpenMP).
#   GGML_SRC=/path/to/ggml bench/compare_ggml_quant.sh [THREADS...]
set -euo pipefail
: "${GGML_SRC:?set GGML_SRC to a ggml source tree}"
build=${GGML_BUILD:-/tmp/ggml-build}
cmake -S "$GGML_SRC" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_LLAMAFILE=ON -DGGML_OPENMP=${GGML_OPENMP:-ON} >/dev/null
ninja -C "$build" ggml ggml-cpu ggml-base >/dev/null
libs=$(find "$build" -name 'libggml*.a' | sort -r)
# A build with the CUDA backend compiled in links the CUDA runtime too.
cuda=""
if grep -q "DFATHOM_WITH_CUDA" build/build.ninja 2>/dev/null; then
  cuda="-L/usr/local/cuda/lib64 -lcudart -lcublas"
fi
g++ -O2 -std=c++20 -Isrc -I"$GGML_SRC/include" bench/ggml_quant_matmul.cpp -o "$build/ggml_quant_matmul" \
  build/libfathom_core.a $libs $cuda -fopenmp -lpthread -lm
for t in ${*:-1 2}; do "$build/ggml_quant_matmul" "$t" 5; done
