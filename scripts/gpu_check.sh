#!/bin/bash
# On the GPU machine: the CUDA op suite and every fixture model on the GPU
# against the CPU (when .device/tests.tar.xz came along), and decode/prefill
# speed of a random-weight model of a real shape on the GPU and its host CPU
# (when .device/fathom.tar.xz came along). Both come from scripts/gpu_bundle.sh
# (built here; that machine has no apt packages).
#   scripts/gpu_check.sh [shape]      (shape: qwen3-0.6b, the default, or llama-3.2-1b)
set -uo pipefail
cd "$(dirname "$0")/.."
shape=${1:-qwen3-0.6b}
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
bin=/tmp/fathom-device
mkdir -p "$bin"
for bundle in .device/*.tar.xz; do tar xJf "$bundle" -C "$bin"; done
cublas=$(dirname "$(find /usr/local /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$bin/lib:$cublas:${LD_LIBRARY_PATH:-}"
for b in "$bin"/fathom*; do ldd "$b" | grep "not found" | sed "s|^|$(basename "$b") lacks |"; done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
lscpu | grep 'Model name'

if [ -x "$bin/fathom_tests" ]; then
echo "== op suite and fixture parity on cuda"
"$bin/fathom_tests" --gtest_filter='*OpSuite*/cuda:*DeviceParity*' --gtest_brief=1 2>&1 | tee "$out/tests.log" | tail -60
fi
[ -x "$bin/fathom" ] || exit 0

echo "ceilings: $(python3 scripts/gpu_ceilings.py 2>/dev/null)"
echo "== speed: $shape, random bf16 weights (decode: 64 tokens after a synthetic context; medians of 3)"
python3 scripts/make_random_model.py --shape "$shape" --out /tmp/model >/dev/null
fields() { tr -d ' \n' | grep -o '"\(backend\|decode_tok_s\|prefill_tok_s\|weight_bytes\|kv_bytes\)":[^,}]*' | tr '\n' ' '; }
{
  for device in cuda cpu; do
    for depth in 512 8192; do
      [ "$device" = cpu ] && [ "$depth" = 8192 ] && continue
      echo "$device decode at $depth: $("$bin/fathom" bench --model /tmp/model --device "$device" --dtype bf16 \
        --prompt-tokens "$depth" --gen-tokens 64 --repeat 3 --synthetic-context 2>&1 | fields)"
    done
    for prompt in 512 2048; do
      [ "$device" = cpu ] && [ "$prompt" = 2048 ] && continue
      echo "$device prefill $prompt: $("$bin/fathom" bench --model /tmp/model --device "$device" --dtype bf16 \
        --prompt-tokens "$prompt" --gen-tokens 1 --repeat 3 2>&1 | fields)"
    done
  done
  echo "transformers: $(python3 scripts/hf_generate_speed.py /tmp/model --prompt-tokens 512 --gen-tokens 64 2>/dev/null)"
} | tee "$out/speed.log"

# PROFILE=1: GPU time per kernel over two decode steps (after a few warm ones),
# to compare with the step's wall time (the rest is the host's).
if [ "${PROFILE:-0}" = 1 ]; then
  echo "== decode kernels (ncu, 2 steps)"
  ncu --clock-control none --print-summary per-kernel --launch-skip 3000 --launch-count 1300 \
    "$bin/fathom" bench --model /tmp/model --device cuda --dtype bf16 --prompt-tokens 512 --gen-tokens 12 \
    --synthetic-context > "$out/profile.log" 2>&1
  grep -E "^  [^ ].*\(|gpu__time_duration.sum|Duration" "$out/profile.log" | head -80
fi
