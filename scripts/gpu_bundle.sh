#!/bin/bash
# Packs what the GPU machine needs into .device/gpu.tar.xz (ignored by git;
# the device tool carries it), built here with the CUDA backend: `tests`
# gives gpu_tests (the op suite and the device parity tests, linked on their
# own), `bench` gives fathom_bench (`fathom bench` alone,
# bench/bench_only_main.cpp), `timeline` the kernel timeline library
# (bench/kernel_timeline.cpp) and its CUPTI, `server` the whole fathom binary with the shared
# libraries of ours it links in lib/ (set LD_LIBRARY_PATH there). That machine
# has CUDA and cuBLAS but none of our apt packages. The device tool carries
# 64 MiB with the tracked tree (~62 MiB, 23 MiB of it the trained model's
# weights), which leaves about 1 MB: one binary per call, stripped, xz with its
# x86 filter, our other libraries linked statically. With those weights moved
# out of the tree for the call (and back after it), a tests, two bench and a
# server bundle (4.3 MB) have travelled together.
# The bench binary fits only without the PTX of a default build: bundle from
# an sm_90a-only build (ccache makes it quick beside build/):
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real
#   scripts/gpu_bundle.sh tests|bench|server [build dir] [name]
# The bundle is .device/NAME.tar.xz (gpu by default); bundles of other names
# stay, so that bundles of two commits travel together (gpu_compare.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:?tests, bench or server}
build=${2:-build}
name=${3:-gpu}
grep -q "DFATHOM_WITH_CUDA" "$build/build.ninja" || { echo "$build has no CUDA backend" >&2; exit 1; }
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
stage=.device/gpu-stage
rm -rf "$stage" ".device/$name.tar.xz" && mkdir -p "$stage"
ninja -C "$build" fathom_core fathom_text fathom_text_tokenizer >/dev/null
libs=("$build/libfathom_core.a" "$build/libfathom_text.a" "$build/libfathom_text_tokenizer.a" "$build/libfathom_core.a")
cuda=(-L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt)  # cuBLAS is opened at run time (cublas_library.h)
static=(-l:libpcre2-8.a -l:libutf8proc.a -lpthread -Wl,--gc-sections)
case "$what" in
  tests)
    g++ -O2 -std=c++20 -Isrc -Itests -DFATHOM_FIXTURES_DIR="\"$PWD/tests/fixtures\"" tests/backend/op_suite_test.cpp \
      tests/parity/device_parity_test.cpp tests/parity/device_memory_test.cpp -o "$stage/gpu_tests" "${libs[@]}" "${cuda[@]}" -lgtest_main -lgtest \
      "${static[@]}" ;;
  bench)
    g++ -O2 -std=c++20 -Isrc bench/bench_only_main.cpp src/cli/cmd_bench.cpp src/cli/cmd_quantize.cpp src/cli/common_options.cpp \
      src/cli/speculation_options.cpp -o "$stage/fathom_bench" "${libs[@]}" "${cuda[@]}" "${static[@]}" ;;
  server)
    ninja -C "$build" fathom >/dev/null
    cp "$build/fathom" "$stage/fathom"
    mkdir -p "$stage/lib"
    system='/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so|/cuda'  # that machine has these
    ldd "$build/fathom" | awk '/=> \//{print $3}' | grep -v -E "$system" |
      while read -r lib; do cp -L "$lib" "$stage/lib/"; done ;;
  timeline)  # bench/kernel_timeline.cpp, with the CUPTI it was built against
    cuda_root=$(dirname "$(dirname "$(readlink -f /usr/local/cuda/bin/nvcc)")")
    cupti=$(ls "$cuda_root"/lib/libcupti.so.* "$cuda_root"/extras/CUPTI/lib64/libcupti.so.* 2>/dev/null | head -1 || true)
    g++ -O2 -std=c++20 -shared -fPIC -I"$cuda_root/include" -I"$cuda_root/extras/CUPTI/include" bench/kernel_timeline.cpp \
      -o "$stage/libkernel_timeline.so" -L"$(dirname "$cupti")" -lcupti
    cp -L "$cupti" "$stage/" ;;
  *) echo "gpu_bundle.sh: tests, bench, server or timeline, not $what" >&2; exit 1 ;;
esac
find "$stage" -maxdepth 1 -type f -exec strip {} +  # the binaries (lib/ holds Debian's, stripped already)
tar cf - -C "$stage" . | xz --x86 --lzma2=preset=9e,nice=273 > ".device/$name.tar.xz"
rm -rf "$stage"
ls -l ".device/$name.tar.xz"
