#!/usr/bin/env bash
# Prefill and decode of one model's bf16 weights and its quantized folders,
# interleaved round by round on the same machine; prints the medians.
#   bench/quantized_speed.sh BF16_DIR "Q8_DIR Q4_DIR ..." [ROUNDS] [THREADS...]
set -euo pipefail
ref=$1; quantized=$2; rounds=${3:-3}; shift 3 || true
threads=${*:-"1 2"}
out=$(mktemp)
for round in $(seq "$rounds"); do
  for t in $threads; do
    for m in "$ref" $quantized; do
      build/fathom bench --model "$m" --prompt-tokens 512 --gen-tokens 64 --threads "$t" |
        python3 -c "import json,sys; r=json.load(sys.stdin); print('$m', $t, r['prefill_tok_s'], r['decode_tok_s'], r['weight_bytes'])" >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m, t, pp, tg, wb = line.split()
    rows.setdefault((m, int(t)), []).append((float(pp), float(tg), int(wb)))
print("| model | threads | weight bytes | pp512 tok/s | tg64 tok/s (after 512) |")
print("| --- | --- | --- | --- | --- |")
for (m, t), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f"| {m} | {t} | {v[0][2]} | {statistics.median(x[0] for x in v):.1f} | {statistics.median(x[1] for x in v):.1f} |")
PY
rm -f "$out"
