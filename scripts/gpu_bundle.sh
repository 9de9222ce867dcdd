#!/bin/bash
# Packs what the GPU machine needs into .device/ (ignored by git; the device
# tool carries it), built here with the CUDA backend: tests.tar.xz (the test
# binary) and fathom.tar.xz (the fathom binary with the shared libraries of
# ours that the GPU machine's image lacks: it has CUDA, cuBLAS and a base
# system, none of our apt packages). Stripped, xz -9e, and one per call: the
# tool's 64 MiB limit counts the whole tracked tree too.
#   scripts/gpu_bundle.sh [build dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
rm -rf .device && mkdir -p .device/stage/lib
strip -o .device/stage/fathom_tests "$build/tests/fathom_tests"
strip -o .device/stage/fathom "$build/fathom"
ldd "$build/fathom" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libcpp-httplib*|libutf8proc*) cp -L "$lib" .device/stage/lib/ ;;
  esac
done
tar cf - -C .device/stage fathom_tests | xz -9e > .device/tests.tar.xz
tar cf - -C .device/stage fathom lib | xz -9e > .device/fathom.tar.xz
rm -rf .device/stage
ls -l .device
