#!/usr/bin/env bash
# fathom bench and llama-bench on the same models, interleaved, for R rounds.
# Needs a llama.cpp build (LLAMA_DIR, default /work/llamacpp) and GGUF copies of the
# models (GGUF_DIR); the HF folders come from scripts/make_random_model.py (MODEL_DIR).
# Prints one JSON line per measurement; summarize with bench/summarize_compare.py.
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_DIR=${LLAMA_DIR:-/work/llamacpp}
MODEL_DIR=${MODEL_DIR:-/work/models}
GGUF_DIR=${GGUF_DIR:-/work/models/gguf}
ROUNDS=${ROUNDS:-3}
for round in $(seq "$ROUNDS"); do
  for model in qwen3-0.6b llama-3.2-1b; do
    for threads in 2 1; do
      build/fathom bench --model "$MODEL_DIR/$model" --prompt-tokens 512 --gen-tokens 128 --threads "$threads" |
        python3 -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'engine':'fathom','round':$round,'model':'$model','threads':$threads,'pp512':d['prefill_tok_s'],'tg128':d['decode_tok_s']}))"
      "$LLAMA_DIR/build/bin/llama-bench" -m "$GGUF_DIR/$model-bf16.gguf" -p 512 -n 128 -t "$threads" -r 1 -o json 2>/dev/null |
        python3 -c "
import json,sys
rows=json.load(sys.stdin); r={'engine':'llama.cpp','round':$round,'model':'$model','threads':$threads}
for x in rows: r['pp512' if x['n_prompt'] else 'tg128']=x['avg_ts']
print(json.dumps(r))"
    done
  done
done
