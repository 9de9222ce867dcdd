#!/bin/bash
# On the GPU machine: the server under load, in one device call. A server
# bundle (.device/NAME.tar.xz from `scripts/gpu_bundle.sh server build-gpu
# NAME`) serves random weights of the Llama-3-8B shape, drawn on the GPU,
# with the Llama 3.1 tokenizer (carry .cache/tokenizers/llama3_1 with
# .device); scripts/server_load.py then loads it at each concurrency, pass
# after pass, with its usual requests (logprobs and a logit bias: their rows
# come to the host) and with --plain ones (greedy, nothing read on the host:
# the engine takes picks), interleaved so that the two are compared within
# one call. LOADS lists other request kinds as server_load.py arguments,
# separated by '|' (e.g. LOADS="--plain|--plain --temperature 0.8"). With
# several bundles, each pass starts each bundle's server in turn and runs
# every load against it, so that two builds are compared within one call.
#   [CONCURRENCY="64 8"] [PASSES=2] [ROUNDS=2] [LOADS=…] scripts/gpu_server_load.sh NAME [NAME…]
# Everything printed also goes to $OUT/log, the servers' output to $OUT/server-NAME.log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
[ $# -ge 1 ] || { echo "usage: gpu_server_load.sh SERVER_BUNDLE [SERVER_BUNDLE…]" >&2; exit 2; }
out=${OUT:-/tmp/gpu_server_load}
mkdir -p "$out"
exec > >(tee -a "$out/log") 2>&1
tokenizer=.cache/tokenizers/llama3_1
[ -f "$tokenizer/tokenizer.json" ] || { echo "no $tokenizer (carry it)" >&2; exit 2; }
for name in "$@"; do
  [ -f ".device/$name.tar.xz" ] || { echo "no .device/$name.tar.xz" >&2; exit 2; }
  rm -rf "/tmp/fathom-$name" && mkdir -p "/tmp/fathom-$name" && tar xJf ".device/$name.tar.xz" -C "/tmp/fathom-$name"
done
cublas=$(dirname "$(find /usr/local /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "ceilings: $(python3 scripts/gpu_ceilings.py 2>/dev/null)"

model=/dev/shm/server-model
rm -rf "$model"
python3 scripts/make_random_model.py --shape llama-3-8b --out "$model" --torch-cuda 2>&1 | tail -1
cp "$tokenizer"/* "$model/"
port=8080
server=
trap 'kill $server 2>/dev/null; rm -rf "$model"' EXIT
up() { python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null; }
IFS='|' read -r -a loads <<< "${LOADS:-|--plain}"
for pass in $(seq "${PASSES:-2}"); do
  for name in "$@"; do
    LD_LIBRARY_PATH="/tmp/fathom-$name/lib:$cublas:${LD_LIBRARY_PATH:-}" "/tmp/fathom-$name/fathom" serve \
      --model "$model" --device cuda --dtype bf16 --max-running 64 --ctx-size 1024 --port "$port" \
      >> "$out/server-$name.log" 2>&1 &
    server=$!
    for _ in $(seq 180); do up && break; kill -0 $server 2>/dev/null || break; sleep 1; done
    up || { echo "the server of $name did not come up:"; tail -20 "$out/server-$name.log"; exit 1; }
    echo "$name: server up after ${SECONDS} s"
    for concurrency in ${CONCURRENCY:-64 8}; do
      for load in "${loads[@]}"; do
        echo "$name concurrency $concurrency pass $pass ${load:-rows to the host}:"
        # shellcheck disable=SC2086  # a load is several arguments
        timeout 300 python3 scripts/server_load.py "http://127.0.0.1:$port" --concurrency "$concurrency" \
          --rounds "${ROUNDS:-2}" --ban 128001,128008,128009 $load
      done
    done
    kill $server && wait $server 2>/dev/null
  done
done
echo "done after ${SECONDS} s"
