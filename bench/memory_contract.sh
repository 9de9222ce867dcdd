#!/usr/bin/env bash
# The memory contract against the process's real peak: for each context, KV
# scheme and compute dtype, `fathom fit --json`'s total_bytes next to
# `fathom bench`'s peak_rss_bytes for the same flags (prompt + generated = ctx).
# Usage: bench/memory_contract.sh MODEL_DIR [threads] [contexts...]
# Prints one markdown row per run: ctx | dtype | kv | predicted | measured | predicted/measured.
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1
threads=${2:-1}
shift $(( $# >= 2 ? 2 : $# ))
contexts=("$@")
[ ${#contexts[@]} -eq 0 ] && contexts=(512 4096 16384)
gen=16
budget=20GiB  # the same budget on both sides, so the policy picks the same chunk
echo "| ctx | dtype | kv | prefill chunk | fit total (MB) | bench peak RSS (MB) | fit / peak |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for ctx in "${contexts[@]}"; do
  for dtype in bf16 f32; do
    for kv in "--kv-quant off" "--kv-quant 8 --quantized-kv-start 0" "--kv-quant 4 --quantized-kv-start 0" \
              "--turbo-kv 3,4"; do
      common=(--model "$model" --dtype "$dtype" --threads "$threads" --memory-budget "$budget")
      # shellcheck disable=SC2086
      fit=$(build/fathom fit "${common[@]}" --ctx "$ctx" --json $kv)
      # shellcheck disable=SC2086
      bench=$(build/fathom bench "${common[@]}" --prompt-tokens $((ctx - gen)) --gen-tokens "$gen" $kv)
      python3 - "$fit" "$bench" "$ctx" "$dtype" <<'PY'
import json, sys
fit, bench = json.loads(sys.argv[1]), json.loads(sys.argv[2])
p, m = fit["total_bytes"], bench["peak_rss_bytes"]
print(f"| {sys.argv[3]} | {sys.argv[4]} | {bench['kv_scheme']} | {fit['prefill_chunk']} | {p/1e6:.1f} | {m/1e6:.1f} | {p/m:.3f} |",
      flush=True)
PY
    done
  done
done
