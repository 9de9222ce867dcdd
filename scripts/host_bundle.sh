#!/bin/bash
# Packs the CPU engine for the GPU machine's host processor (an Intel Xeon
# with AMX; it has none of our apt packages) into .device/host.tar.xz:
# fathom_bench (`fathom bench` alone, bench/bench_only_main.cpp), host_tests
# (the matmul and attention kernels' and the models' parity tests, linked on
# their own: the whole test binary is too large to carry), the
# prefill GEMM bench, a memory-bandwidth bench
# built without -march=native, ggml's side-by-side harness when GGML_HOST_BUILD
# names a ggml build configured for that processor (see bench/RESULTS.md), and
# the shared libraries of ours they link. Run it there with scripts/host_bench.sh.
# The device tool carries 64 MiB with the tracked tree, which leaves little (a
# 0.8 MB bundle went, 1.5 MB did not):
# name fewer binaries (fathom_bench, host_tests, gemm_throughput, memory_bandwidth,
# ggml_quant_matmul) to fit, and build without CUDA (-DFATHOM_CUDA=OFF) for
# binaries a fraction of the size.
#   [GGML_HOST_BUILD=/tmp/ggml-host GGML_SRC=/tmp/ggml-src] [LLAMA_HOST_BUILD=<llama.cpp>/build-host] \
#     scripts/host_bundle.sh [build dir] [binary...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
wanted=" ${*:-fathom_bench host_tests gemm_throughput memory_bandwidth ggml_quant_matmul} "
want() { [[ "$wanted" == *" $1 "* ]]; }
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
stage=.device/host-stage
rm -rf "$stage" && mkdir -p "$stage/lib"
ninja -C "$build" fathom_core fathom_text fathom_text_tokenizer >/dev/null
if want gemm_throughput; then
  ninja -C "$build" gemm_throughput >/dev/null
  strip -o "$stage/gemm_throughput" "$build/gemm_throughput"
fi
if want fathom_bench; then
  g++ -O2 -std=c++20 -Isrc bench/bench_only_main.cpp src/cli/cmd_bench.cpp src/cli/cmd_quantize.cpp src/cli/common_options.cpp \
    src/cli/speculation_options.cpp -o "$stage/fathom_bench" "$build/libfathom_core.a" "$build/libfathom_text.a" \
    "$build/libfathom_text_tokenizer.a" "$build/libfathom_core.a" -lpcre2-8 -lutf8proc -lpthread
  strip "$stage/fathom_bench"
fi
if want host_tests; then
  avx512="-mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mfma -mavx2 -Wno-maybe-uninitialized"
  g++ -O2 -std=c++20 $avx512 -Isrc -Itests -DFATHOM_FIXTURES_DIR="\"$PWD/tests/fixtures\"" \
    tests/backend/matmul_test.cpp tests/backend/attention_test.cpp tests/backend/amx_emulated_tiles.cpp \
    tests/backend/quantized_matmul_test.cpp \
    tests/parity/parity_test.cpp \
    tests/parity/trained_model_test.cpp -o "$stage/host_tests" "$build/libfathom_core.a" "$build/libfathom_text.a" \
    -lgtest_main -lgtest -lpcre2-8 -lutf8proc -lpthread
  strip "$stage/host_tests"
fi
if want memory_bandwidth; then
  g++ -O3 -mavx512f -mavx512bw -mavx2 -mfma -std=c++20 -pthread bench/memory_bandwidth.cpp -o "$stage/memory_bandwidth"
fi
if [ -n "${GGML_HOST_BUILD:-}" ] && want ggml_quant_matmul; then
  cuda=""
  grep -q "DFATHOM_WITH_CUDA" "$build/build.ninja" && cuda="-L/usr/local/cuda/lib64 -lcudart -lcublas"
  g++ -O2 -std=c++20 -Isrc -I"$GGML_SRC/include" bench/ggml_quant_matmul.cpp -o "$stage/ggml_quant_matmul" \
    "$build/libfathom_core.a" $(find "$GGML_HOST_BUILD" -name 'libggml*.a' | sort -r) $cuda -fopenmp -lpthread -lm
  strip "$stage/ggml_quant_matmul"
fi
for b in "$stage"/*; do
  [ -f "$b" ] || continue
  ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libcpp-httplib*|libutf8proc*|libgomp*) cp -L "$lib" "$stage/lib/" ;;
    esac
  done
done
tar cf - -C "$stage" . | xz -9e > .device/host.tar.xz
rm -rf "$stage"
ls -l .device/host.tar.xz
# llama.cpp for the comparison (bench/compare_llama_cpp.sh) when LLAMA_HOST_BUILD names
# a static build of it configured for that processor (bench/RESULTS.md has the flags):
# llama-bench, llama-quantize, gguf-py and libgomp into .device/llama-host.tar.xz.
if [ -n "${LLAMA_HOST_BUILD:-}" ]; then
  llama_stage=.device/llama-stage
  rm -rf "$llama_stage" && mkdir -p "$llama_stage/build/bin" "$llama_stage/lib"
  for b in llama-bench llama-quantize; do strip -o "$llama_stage/build/bin/$b" "$LLAMA_HOST_BUILD/bin/$b"; done
  cp -r "$LLAMA_HOST_BUILD/../gguf-py" "$llama_stage/gguf-py"
  git -C "$LLAMA_HOST_BUILD/.." log -1 --format='%h %s' > "$llama_stage/COMMIT"
  ldd "$llama_stage/build/bin/llama-bench" | awk '/libgomp/ {print $3}' | xargs -r -I{} cp -L {} "$llama_stage/lib/"
  tar cf - -C "$llama_stage" . | xz -9e > .device/llama-host.tar.xz
  rm -rf "$llama_stage"
  ls -l .device/llama-host.tar.xz
fi
