#!/bin/bash
# On the GPU machine: the server under load, in one device call. A server
# bundle (.device/NAME.tar.xz from `scripts/gpu_bundle.sh server build-gpu
# NAME`) serves random weights of the Llama-3-8B shape, drawn on the GPU,
# with the Llama 3.1 tokenizer (carry .cache/tokenizers/llama3_1 with
# .device); scripts/server_load.py then loads it at each concurrency, pass
# after pass, with its usual requests (logprobs and a logit bias: their rows
# come to the host) and with --plain ones (greedy, nothing read on the host:
# the engine takes picks), interleaved so that the two are compared within
# one call.
#   [CONCURRENCY="64 8"] [PASSES=2] [ROUNDS=2] scripts/gpu_server_load.sh NAME
# Everything printed also goes to $OUT/log, the server's output to $OUT/server.log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
name=${1:?usage: gpu_server_load.sh SERVER_BUNDLE}
out=${OUT:-/tmp/gpu_server_load}
mkdir -p "$out"
exec > >(tee -a "$out/log") 2>&1
[ -f ".device/$name.tar.xz" ] || { echo "no .device/$name.tar.xz" >&2; exit 2; }
tokenizer=.cache/tokenizers/llama3_1
[ -f "$tokenizer/tokenizer.json" ] || { echo "no $tokenizer (carry it)" >&2; exit 2; }
bundle=/tmp/fathom-$name
rm -rf "$bundle" && mkdir -p "$bundle" && tar xJf ".device/$name.tar.xz" -C "$bundle"
cublas=$(dirname "$(find /usr/local /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$bundle/lib:$cublas:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "ceilings: $(python3 scripts/gpu_ceilings.py 2>/dev/null)"

model=/dev/shm/server-model
rm -rf "$model"
python3 scripts/make_random_model.py --shape llama-3-8b --out "$model" --torch-cuda 2>&1 | tail -1
cp "$tokenizer"/* "$model/"
port=8080
"$bundle/fathom" serve --model "$model" --device cuda --dtype bf16 --max-running 64 --ctx-size 1024 \
  --port "$port" > "$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$model"' EXIT
up() { python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null; }
for _ in $(seq 180); do up && break; kill -0 $server 2>/dev/null || break; sleep 1; done
up || { echo "the server did not come up:"; tail -20 "$out/server.log"; exit 1; }
echo "server up after ${SECONDS} s"
for concurrency in ${CONCURRENCY:-64 8}; do
  for pass in $(seq "${PASSES:-2}"); do
    for plain in "" --plain; do
      echo "concurrency $concurrency pass $pass ${plain:-rows to the host}:"
      timeout 300 python3 scripts/server_load.py "http://127.0.0.1:$port" --concurrency "$concurrency" \
        --rounds "${ROUNDS:-2}" --ban 128001,128008,128009 $plain
    done
  done
done
echo "done after ${SECONDS} s"
