#!/usr/bin/env bash
# Decode speed at a 4096-token context for each KV scheme (fathom bench; one run each).
# Usage: bench/kv_decode_4k.sh MODEL_DIR [threads]
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1
threads=${2:-2}
for flags in "" "--kv-quant 8 --quantized-kv-start 0" "--kv-quant 4 --quantized-kv-start 0" \
             "--kv-quant 4 --kv-group-size 32 --quantized-kv-start 0" "--kv-quant 2 --quantized-kv-start 0" \
             "--turbo-kv 4,4" "--turbo-kv 3,4" "--turbo-kv 2,3"; do
  # shellcheck disable=SC2086
  build/fathom bench --model "$model" --prompt-tokens 4096 --gen-tokens 32 --threads "$threads" $flags |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({k: d[k] for k in ('kv_scheme','prefill_tok_s','decode_tok_s','kv_bytes')}))"
done
