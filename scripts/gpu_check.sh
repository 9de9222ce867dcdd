#!/bin/bash
# On the GPU machine, with what .device/gpu.tar.xz brought (scripts/gpu_bundle.sh,
# built here; that machine has no apt packages): gpu_tests runs the CUDA op
# suite, every fixture model on the GPU against the CPU and replayed steps
# against eager ones; fathom_bench measures decode/prefill speed of a
# random-weight model of a real shape on the GPU (decode with step graphs on
# and off) and its host CPU.
#   [BATCHES="8 32"] [HF=0] [CPU=0] [GRAPHS_OFF=1] scripts/gpu_check.sh ["shape …"]
#   (qwen3-0.6b, the default, llama-3-8b, llama-3.2-1b; several run one after another)
set -uo pipefail
cd "$(dirname "$0")/.."
shapes=${1:-qwen3-0.6b}
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
bin=/tmp/fathom-device
rm -rf "$bin" && mkdir -p "$bin"
for bundle in .device/*.tar.xz; do tar xJf "$bundle" -C "$bin"; done
cublas=$(dirname "$(find /usr/local /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$bin/lib:$cublas:${LD_LIBRARY_PATH:-}"
for b in "$bin"/*; do [ -f "$b" ] && ldd "$b" | grep "not found" | sed "s|^|$(basename "$b") lacks |"; done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
lscpu | grep 'Model name'

if [ -x "$bin/gpu_tests" ]; then
echo "== op suite and fixture parity on cuda"
"$bin/gpu_tests" --gtest_filter='*OpSuite*/cuda:*DeviceParity*:*DeviceMemory*' --gtest_brief=1 2>&1 | tee "$out/tests.log" | tail -60
fi
[ -x "$bin/fathom_bench" ] || exit 0

echo "ceilings: $(python3 scripts/gpu_ceilings.py 2>/dev/null)"
fields() { tr -d ' \n' | grep -o '"\(decode_tok_s\|prefill_tok_s\|weight_bytes\|kv_bytes\|device_peak_bytes\|device_contract_bytes\|replays\|captures\|updated_nodes\|host_ms_per_replay\|gpu_ms_per_replay\)":[^,}]*' | tr '\n' ' '; }
# In memory (tmpfs) where it is large enough (a container's /dev/shm may be 64 MB).
model=/dev/shm/model
[ "$(df --output=avail -B1G /dev/shm 2>/dev/null | tail -1)" -ge 40 ] 2>/dev/null || model=/tmp/model
bench() { "$bin/fathom_bench" --model "$model" --dtype bf16 --repeat 3 "$@" 2>&1 | fields; }
for shape in $shapes; do
  echo "== speed: $shape, random bf16 weights (decode: 64 tokens after a synthetic context; medians of 3)"
  # Drawn on the GPU: the 8B shape's 16 GB take seconds, not minutes.
  rm -rf "$model"
  python3 scripts/make_random_model.py --shape "$shape" --out "$model" --torch-cuda 2>&1 | tail -1
  {
    for depth in 512 8192; do
      echo "$shape cuda decode at $depth: $(bench --device cuda --prompt-tokens "$depth" --gen-tokens 64 --synthetic-context)"
      [ "${GRAPHS_OFF:-0}" = 1 ] && echo "$shape cuda decode at $depth, graphs off: $(FATHOM_CUDA_GRAPHS=0 bench \
        --device cuda --prompt-tokens "$depth" --gen-tokens 64 --synthetic-context)"
    done
    for batch in ${BATCHES:-}; do
      echo "$shape cuda decode, batch $batch at 512: $(bench --device cuda --prompt-tokens 512 --gen-tokens 64 \
        --batch "$batch" --synthetic-context)"
    done
    for prompt in 512 2048; do
      echo "$shape cuda prefill $prompt: $(bench --device cuda --prompt-tokens "$prompt" --gen-tokens 1)"
    done
    [ "${CPU:-1}" = 1 ] && echo "$shape cpu decode at 512: $(bench --device cpu --prompt-tokens 512 --gen-tokens 64 \
      --synthetic-context)"
    [ "${HF:-1}" = 1 ] && echo "$shape transformers: $(python3 scripts/hf_generate_speed.py "$model" \
      --prompt-tokens 512 --gen-tokens 64 2>/dev/null)"
  } | tee -a "$out/speed.log"
done

# PROFILE=1: each op's GPU time per decoded token and per prefill of 2,048
# tokens (ops launched one by one and waited for: FATHOM_CUDA_SYNC_OPS=1 with
# graphs off; each op also carries a wait of ~10 µs). ncu over a whole step
# took longer than a device call may.
top_ops() { python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
for phase, unit in (("decode", "token"), ("prefill", "prefill")):
    ops = r.get(phase + "_ops")
    if not ops: continue
    top = sorted(ops.items(), key=lambda kv: -kv[1]["ms_per_" + unit])[:12]
    print(phase, "ms per", unit, "; outside the ops:", round(r[phase + "_outside_ops_ms_per_" + unit], 3))
    for name, e in top: print("  %-45s %9.3f ms %8.1f calls" % (name, e["ms_per_" + unit], e["calls_per_" + unit]))
'; }
if [ "${PROFILE:-0}" = 1 ]; then
  echo "== ops (each waited for)"
  FATHOM_CUDA_GRAPHS=0 FATHOM_CUDA_SYNC_OPS=1 "$bin/fathom_bench" --model "$model" --device cuda --dtype bf16 \
    --prompt-tokens 512 --gen-tokens 32 --synthetic-context --profile-ops 2>/dev/null | tee "$out/profile.log" | top_ops
  FATHOM_CUDA_GRAPHS=0 FATHOM_CUDA_SYNC_OPS=1 "$bin/fathom_bench" --model "$model" --device cuda --dtype bf16 \
    --prompt-tokens 2048 --gen-tokens 1 --profile-ops 2>/dev/null | tee "$out/profile_prefill.log" | top_ops
  echo "== each kernel inside a replayed decode step (its graph without the kernel's nodes, against whole)"
  "$bin/fathom_bench" --model "$model" --device cuda --dtype bf16 --prompt-tokens 512 --gen-tokens 32 \
    --synthetic-context --profile-step-graph 2>/dev/null | tee "$out/step_graph.log" | python3 scripts/graph_costs.py
fi
