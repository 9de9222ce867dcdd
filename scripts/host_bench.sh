#!/bin/bash
# On the GPU machine's host CPU (16 cores, AMX): the AMX matmul tests and the
# models' parity tests, the GEMM kernels' GFLOP/s, and fathom's prefill and
# decode with AMX on and off at 1–16 threads (interleaved), then ggml's bf16
# matmuls beside fathom's when the bundle has the harness. Needs
# .device/host.tar.xz from scripts/host_bundle.sh.
# `quant`: quantized prefill (q8 and q4 g64 folders `fathom quantize` makes of the
# same random model) with AMX on and off. `llama`: bench/compare_llama_cpp.sh, fathom
# and llama.cpp interleaved on the same weights, when .device/llama-host.tar.xz is
# there (scripts/host_bundle.sh with LLAMA_HOST_BUILD), one run per thread count and format.
#   scripts/host_bench.sh [part...]   parts: tests gemm speed ggml quant llama (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
parts=${*:-tests gemm speed ggml quant llama}
THREADS=${THREADS:-"1 2 4 8 16"}
bin=/tmp/fathom-host
mkdir -p "$bin" && tar xJf .device/host.tar.xz -C "$bin"
cublas=$(dirname "$(find /usr/local /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$bin/lib:$cublas:${LD_LIBRARY_PATH:-}"
for b in "$bin"/*; do [ -f "$b" ] && ldd "$b" 2>/dev/null | grep "not found" | sed "s|^|$(basename "$b") lacks |"; done
# The test binary names its fixtures by the absolute path of the checkout it was built in.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
lscpu | grep -E 'Model name|^CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|L2 cache|L3 cache'
grep -o 'amx[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
has() { [[ " $parts " == *" $1 "* ]]; }
if has tests; then
  echo "== tests (AMX on)"
  "$bin/host_tests" --gtest_brief=1 2>&1 | tail -15
fi
if has gemm; then
  echo "== memory bandwidth"; "$bin/memory_bandwidth" --gib 2 --reps 5 --threads 1,2,16 2>/dev/null | tr -d '\n' | head -c 600; echo
  echo "== GEMM kernels"
  for t in $THREADS; do "$bin/gemm_throughput" "$t" 3; done
fi
fields() { tr -d ' \n' | grep -o '"\(backend\|decode_tok_s\|prefill_tok_s\)":[^,}]*' | tr '\n' ' '; }
if has speed || has quant; then
  [ -f /tmp/model/config.json ] || python3 scripts/make_random_model.py --shape qwen3-0.6b --out /tmp/model >/dev/null
fi
if has speed; then
  echo "== fathom bench, qwen3-0.6b shape, random bf16 weights: prefill (medians of 3) and decode at depth 512"
  run() { "$bin/fathom_bench" --model /tmp/model --dtype bf16 "$@" 2>&1 | fields; }
  for t in $THREADS; do
    for amx in 1 0; do
      echo "threads $t amx $amx pp512: $(FATHOM_AMX=$amx run --threads "$t" --prompt-tokens 512 --gen-tokens 1 --repeat 3)"
    done
    echo "threads $t decode@512: $(run --threads "$t" --prompt-tokens 512 --gen-tokens 32 --synthetic-context)"
  done
  for t in 1 2; do
    for amx in 1 0; do
      echo "threads $t amx $amx pp2048: $(FATHOM_AMX=$amx run --threads "$t" --prompt-tokens 2048 --gen-tokens 1)"
    done
  done
fi
if has quant; then
  echo "== quantized prefill pp512 (medians of 3), AMX on and off"
  for bits in 8 4; do
    folder=/tmp/fathom-vs-llama/fathom-q${bits}g64
    [ -f "$folder/config.json" ] || "$bin/fathom_bench" quantize --model /tmp/model --out "$folder" --bits "$bits" \
      --group-size 64 >/dev/null
    for t in ${QUANT_THREADS:-1 2 16}; do
      for amx in 1 0; do
        echo "q$bits g64 threads $t amx $amx: $(FATHOM_AMX=$amx "$bin/fathom_bench" --model "$folder" --dtype bf16 \
          --threads "$t" --prompt-tokens 512 --gen-tokens 1 --repeat 3 2>&1 | fields)"
      done
    done
  done
fi
if has llama && [ -f .device/llama-host.tar.xz ]; then
  llama=/tmp/llama-host
  mkdir -p "$llama" && tar xJf .device/llama-host.tar.xz -C "$llama"
  echo "== fathom and llama.cpp ($(cat "$llama/COMMIT")), interleaved (bench/compare_llama_cpp.sh)"
  # `fathom bench` and `fathom quantize` as the script calls them, from fathom_bench.
  printf '#!/bin/sh\ncmd=$1; shift\n[ "$cmd" = bench ] && exec %s "$@"\nexec %s "$cmd" "$@"\n' \
    "$bin/fathom_bench" "$bin/fathom_bench" > "$bin/fathom" && chmod +x "$bin/fathom"
  for t in ${LLAMA_THREADS:-16 8 4 2 1}; do
    for f in ${FORMATS:-bf16 q8 q4}; do
      LD_LIBRARY_PATH="$llama/lib:$LD_LIBRARY_PATH" LLAMA_CPP_DIR=$llama FATHOM=$bin/fathom MODEL=/tmp/model \
        TOKENIZER=$PWD/.cache/tokenizers/qwen3 PYTHON=python3 WORK=/tmp/fathom-vs-llama FORMATS=$f \
        bench/compare_llama_cpp.sh "$t" 2>&1 | grep -v '^llama.cpp:\|^$\|^|---\|^| threads'
    done
  done
fi
if has ggml && [ -x "$bin/ggml_quant_matmul" ]; then
  echo "== fathom and ggml matmuls, Qwen3-0.6B shapes (bench/ggml_quant_matmul.cpp)"
  for t in $THREADS; do
    stdbuf -oL "$bin/ggml_quant_matmul" "$t" 3 "${GGML_FORMATS:-bf16}" 2>&1 | grep -v '^| ---\|^| threads\|repack tensor'
    echo "(exit ${PIPESTATUS[0]})"
  done
fi
