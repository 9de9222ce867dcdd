#!/usr/bin/env bash
# Prefill (512-token prompt) and decode (128 tokens) of the hybrid and sparse
# families on random-weight models of real shapes, bf16 compute.
# Models: scripts/make_bench_manifests.py (GPU machine, transformers) writes
# config + tensor manifests; scripts/make_random_model.py --manifest writes the
# weights into BENCH_DIR/<name>. Each bench runs 3 times and reports medians (the
# first run reads the weights from disk). Prints one JSON line per model and round.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/work/models/bench}
ROUNDS=${ROUNDS:-1}
THREADS=${THREADS:-2}
MODELS=${MODELS:-"gemma3-1b gemma4-default-12l qwen3.5-default-4l qwen3-30b-a3b-4l qwen3-next-80b-a3b-4l"}
for round in $(seq "$ROUNDS"); do
  for model in $MODELS; do
    build/fathom bench --model "$BENCH_DIR/$model" --dtype bf16 --prompt-tokens 512 --gen-tokens 128 --repeat 3 \
      --threads "$THREADS" | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(json.dumps({'round': $round, 'model': '$model', 'threads': $THREADS, 'pp512': d['prefill_tok_s'],
                  'tg128': d['decode_tok_s'], 'peak_rss_gb': round(d['peak_rss_bytes'] / 1e9, 2), 'weights_gb': round(d['weight_bytes'] / 1e9, 2), 'kv_mb': round(d['kv_bytes'] / 1e6, 1)}))"
  done
done
