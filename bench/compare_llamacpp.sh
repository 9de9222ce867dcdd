#!/usr/bin/env bash
# fathom bench and llama-bench on the same models, interleaved, for R rounds.
# Decode is measured at the same context depth in both engines: at depth 0
# (llama-bench's plain tg128; fathom after a 1-token prompt) and at depth 512
# (llama-bench -d 512; fathom after its 512-token prompt).
# Needs a llama.cpp build (LLAMA_DIR, default /work/llamacpp) and GGUF copies of the
# models (GGUF_DIR); the HF folders come from scripts/make_random_model.py (MODEL_DIR).
# FATHOM_FLAGS / LLAMA_FLAGS add options to each side (e.g. "--weights-in-ram" and
# "-mmp 0" to compare with weights copied into memory on both sides).
# Prints one JSON line per measurement; summarize with bench/summarize_compare.py.
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_DIR=${LLAMA_DIR:-/work/llamacpp}
MODEL_DIR=${MODEL_DIR:-/work/models}
GGUF_DIR=${GGUF_DIR:-/work/models/gguf}
ROUNDS=${ROUNDS:-3}
MODELS=${MODELS:-"qwen3-0.6b llama-3.2-1b"}
THREADS=${THREADS:-"2 1"}
FATHOM_FLAGS=${FATHOM_FLAGS:-}
LLAMA_FLAGS=${LLAMA_FLAGS:-}
fathom() {  # prompt tokens, gen tokens, threads -> "prefill decode"
  build/fathom bench --model "$MODEL_DIR/$model" --prompt-tokens "$1" --gen-tokens "$2" --threads "$3" $FATHOM_FLAGS |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(d['prefill_tok_s'], d['decode_tok_s'])"
}
llama() {  # extra llama-bench args... -> "prompt_ts gen_ts" (0 where not measured)
  "$LLAMA_DIR/build/bin/llama-bench" -m "$GGUF_DIR/$model-bf16.gguf" -t "$threads" -r 1 -o json $LLAMA_FLAGS "$@" 2>/dev/null |
    python3 -c "
import json,sys
rows=json.load(sys.stdin); pp=[x['avg_ts'] for x in rows if x['n_prompt']]; tg=[x['avg_ts'] for x in rows if x['n_gen']]
print(pp[0] if pp else 0, tg[0] if tg else 0)"
}
for round in $(seq "$ROUNDS"); do
  for model in $MODELS; do
    for threads in $THREADS; do
      read -r f_pp f_tg512 < <(fathom 512 128 "$threads")
      read -r _ f_tg0 < <(fathom 1 128 "$threads")
      read -r l_pp l_tg0 < <(llama -p 512 -n 128)
      read -r _ l_tg512 < <(llama -p 0 -n 128 -d 512)
      for e in fathom llama.cpp; do
        if [ $e = fathom ]; then pp=$f_pp; t0=$f_tg0; t512=$f_tg512; else pp=$l_pp; t0=$l_tg0; t512=$l_tg512; fi
        echo "{\"engine\":\"$e\",\"round\":$round,\"model\":\"$model\",\"threads\":$threads,\"pp512\":$pp,\"tg128_d0\":$t0,\"tg128_d512\":$t512}"
      done
    done
  done
done
