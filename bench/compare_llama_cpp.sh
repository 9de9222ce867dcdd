#!/usr/bin/env bash
# fathom and llama.cpp side by side on the same weights, on the CPU, interleaved in one run.
#
#   bench/compare_llama_cpp.sh [THREADS...]          (default: 1 2)
#
# llama.cpp's source comes from the npm registry: the node-llama-cpp package carries the
# llama.cpp release it binds as a git bundle (llama/gitRelease.bundle). It is built here
# with llama.cpp's own defaults for a native CPU build (OpenMP, llamafile's sgemm) into
# $LLAMA_CPP_DIR (default .cache/llama.cpp). The model (default: a random-weight Qwen3-0.6B
# shape with the real Qwen3 tokenizer) is written as a bf16 GGUF by bench/hf_to_gguf.py
# and quantized to Q8_0 and Q4_0 by llama.cpp's llama-quantize; fathom runs the same
# weights as bf16 and as `fathom quantize` folders of the same size per weight (q8 g64 and
# q4 g64: 8.5 and 4.5 bits, as Q8_0 and Q4_0).
#
# Each round runs, per weight format: llama-bench pp$PROMPT (prefill from an empty cache),
# llama-bench tg$GEN at depth $PROMPT, and `fathom bench` (prefill $PROMPT, then decode
# $GEN); $REPS repetitions inside each, $ROUNDS rounds alternating the two. Prints every
# measurement and a table of medians over the rounds with the ratio fathom / llama.cpp.
#
# Environment: MODEL (HF folder), TOKENIZER (folder with tokenizer.json, default the
# fetched Qwen3 one), FORMATS (default "bf16 q8 q4"), PROMPT (512), GEN (64), REPS (3),
# ROUNDS (2), WORK (default /tmp/fathom-vs-llama), FATHOM (build/fathom), PYTHON (/usr/bin/python3,
# with numpy), LLAMA_CPP_DIR (a tree with build/bin/llama-bench and llama-quantize is used as
# it is: scripts/host_bench.sh carries such a build to a machine without a compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${LLAMA_CPP_DIR:-$PWD/.cache/llama.cpp}
node_llama_cpp_version=3.22.1
work=${WORK:-/tmp/fathom-vs-llama}
fathom=${FATHOM:-build/fathom}
prompt=${PROMPT:-512}
gen=${GEN:-64}
reps=${REPS:-3}
rounds=${ROUNDS:-2}
formats=${FORMATS:-bf16 q8 q4}
py=${PYTHON:-/usr/bin/python3}
mkdir -p "$work"

if [ ! -x "$llama/build/bin/llama-bench" ] || [ ! -x "$llama/build/bin/llama-quantize" ]; then
  if [ ! -f "$llama/CMakeLists.txt" ]; then
    pack=$(mktemp -d)
    (cd "$pack" && npm pack --silent "node-llama-cpp@$node_llama_cpp_version" >/dev/null && tar xzf node-llama-cpp-*.tgz package/llama/gitRelease.bundle)
    rm -rf "$llama"
    git clone -q "$pack/package/llama/gitRelease.bundle" "$llama"
    rm -rf "$pack"
  fi
  cmake -S "$llama" -B "$llama/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF >/dev/null
  ninja -C "$llama/build" llama-bench llama-quantize >/dev/null
fi
echo "llama.cpp: $(git -C "$llama" log -1 --format='%h %s' 2>/dev/null) (node-llama-cpp $node_llama_cpp_version's bundle)"

model=${MODEL:-$work/qwen3-0.6b-random}
if [ ! -f "$model/config.json" ]; then
  $py scripts/make_random_model.py --shape qwen3-0.6b --out "$model" >/dev/null
fi
tokenizer=${TOKENIZER:-}
if [ -z "$tokenizer" ] && [ ! -f "$model/tokenizer.json" ]; then
  scripts/fetch_tokenizers.sh >/dev/null
  tokenizer=$PWD/.cache/tokenizers/qwen3
fi

gguf_bf16=$work/model-bf16.gguf
if [ ! -f "$gguf_bf16" ]; then
  PYTHONPATH="$llama/gguf-py" $py bench/hf_to_gguf.py --model "$model" --out "$gguf_bf16" \
    ${tokenizer:+--tokenizer "$tokenizer"}
fi
gguf_of() {
  case $1 in
    bf16) echo "$gguf_bf16" ;;
    q8) echo "$work/model-Q8_0.gguf" ;;
    q4) echo "$work/model-Q4_0.gguf" ;;
  esac
}
folder_of() {
  case $1 in
    bf16) echo "$model" ;;
    *) echo "$work/fathom-$1g64" ;;
  esac
}
for f in $formats; do
  [ "$f" = bf16 ] && continue
  bits=${f#q}
  [ -f "$(gguf_of "$f")" ] || "$llama/build/bin/llama-quantize" "$gguf_bf16" "$(gguf_of "$f")" "Q${bits}_0" >/dev/null 2>&1
  [ -f "$(folder_of "$f")/config.json" ] || "$fathom" quantize --model "$model" --out "$(folder_of "$f")" --bits "$bits" --group-size 64 >/dev/null
  if [ -n "$tokenizer" ]; then cp "$tokenizer"/tokenizer*.json "$(folder_of "$f")/"; fi
done

results=$work/results.tsv
: > "$results"
llama_ts() {  # llama-bench's mean tok/s of its repetitions
  "$llama/build/bin/llama-bench" -m "$1" -t "$2" -r "$reps" -o json "${@:3}" 2>/dev/null |
    $py -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])'
}
for t in ${*:-1 2}; do
  for round in $(seq "$rounds"); do
    for f in $formats; do
      pp=$(llama_ts "$(gguf_of "$f")" "$t" -p "$prompt" -n 0)
      tg=$(llama_ts "$(gguf_of "$f")" "$t" -p 0 -n "$gen" -d "$prompt")
      echo -e "$t\t$f\tllama.cpp\t$pp\t$tg" | tee -a "$results"
      "$fathom" bench --model "$(folder_of "$f")" --dtype bf16 --threads "$t" --prompt-tokens "$prompt" \
        --gen-tokens "$gen" --repeat "$reps" 2>/dev/null |
        $py -c "import json,sys; r=json.load(sys.stdin); print(f'$t\t$f\tfathom\t{r[\"prefill_tok_s\"]}\t{r[\"decode_tok_s\"]}')" |
        tee -a "$results"
    done
  done
done

$py - "$results" "$prompt" "$gen" <<'EOF'
import statistics, sys
rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines()]
prompt, gen = sys.argv[2], sys.argv[3]
runs = {}
for t, f, who, pp, tg in rows:
    runs.setdefault((int(t), f, who), []).append((float(pp), float(tg)))
print(f"\n| threads | weights | pp{prompt} fathom / llama.cpp | ratio | tg{gen} @{prompt} fathom / llama.cpp | ratio |")
print("|---|---|---|---|---|---|")
for (t, f, who) in sorted(runs):
    if who != "fathom" or (t, f, "llama.cpp") not in runs:
        continue
    fa, ll = runs[(t, f, "fathom")], runs[(t, f, "llama.cpp")]
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    print(f"| {t} | {f} | {med(fa, 0):.1f} / {med(ll, 0):.1f} | {med(fa, 0) / med(ll, 0):.2f}x "
          f"| {med(fa, 1):.2f} / {med(ll, 1):.2f} | {med(fa, 1) / med(ll, 1):.2f}x |")
EOF
