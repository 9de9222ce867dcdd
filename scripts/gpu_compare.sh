#!/bin/bash
# On the GPU machine: one device call that checks a change and measures it
# against its base. .device/ holds a tests bundle and two or more bench
# bundles, each built here by `scripts/gpu_bundle.sh tests|bench build-gpu
# NAME` (.device/NAME.tar.xz, the others kept). gpu_tests of the tests
# bundle runs first (op suite on cuda, device parity, device memory); then
# each model (random weights of the 8B shape, drawn on the GPU) decodes with
# every bench bundle in turn, round after round, so that a number is compared
# only with its neighbours of the same call; last, with PROFILE=1, the step
# graph of each bench bundle is timed kernel by kernel.
#   [MODELS="bf16 q4g64 q8g64"] [BATCHES="1"] [ROUNDS=2] [PROFILE=1] [RUN="fathom_bench arguments"] [RUN_TIMEOUT=90] [KEEP_MODEL=1] \
#     scripts/gpu_compare.sh tests main change [more bench bundles…]
# (a tests bundle of "-" runs no tests: the bench bundles only). A bench
# bundle named NAME:VAR=VALUE[,VAR=VALUE…] runs NAME's binary with those
# environment variables, so that one binary's switches are timed side by side
# (e.g. bench_pf bench_pf:FATHOM_CUDA_PREFETCH_MB=0).
# Everything printed also goes to $OUT/log (a call that runs out of time
# still brings back what it measured).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: gpu_compare.sh TESTS_BUNDLE BENCH_BUNDLE [BENCH_BUNDLE…]" >&2; exit 2; }
out=${OUT:-/tmp/gpu_compare}
mkdir -p "$out"
exec > >(tee -a "$out/log") 2>&1
tests=("$1")
shift
[ "$tests" = - ] && tests=()  # "-": no tests bundle, the bench bundles only
bundle() { echo "${1%%:*}"; }
variables() { [[ $1 == *:* ]] && echo "${1#*:}" | tr ',' ' '; }
for name in "${tests[@]}" $(for b in "$@"; do bundle "$b"; done | sort -u); do
  [ -f ".device/$name.tar.xz" ] || { echo "no .device/$name.tar.xz" >&2; exit 2; }
  rm -rf "/tmp/fathom-$name" && mkdir -p "/tmp/fathom-$name" && tar xJf ".device/$name.tar.xz" -C "/tmp/fathom-$name"
done
cublas=$(dirname "$(find /usr/local /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$cublas:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
lscpu | grep 'Model name'
echo "ceilings: $(python3 scripts/gpu_ceilings.py 2>/dev/null)"

for name in "${tests[@]}"; do
  echo "== $name: op suite and fixture parity on cuda"
  timeout 240 "/tmp/fathom-$name/gpu_tests" --gtest_filter='*OpSuite*/cuda:*DeviceParity*:*DeviceMemory*' \
    --gtest_brief=1 > "$out/tests.log" 2>&1
  echo "rc $? after ${SECONDS} s"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|Failure|^\[  FAILED" "$out/tests.log" | head -40
done

# A run's context and length: a synthetic context is drawn on the host, row by
# row, which takes minutes for 64 sequences of 512 tokens; wide batches
# prefill a short prompt instead, e.g. RUN="--prompt-tokens 128 --gen-tokens 32 --repeat 2".
RUN=${RUN:---synthetic-context --prompt-tokens 512 --gen-tokens 64 --repeat 3}
# The bench's decode rates (with --spec also with and without drafts, and how
# many were drafted and taken), the GPU's time a replayed step, and the host's: from a
# step's start to its first launch (lead) and to its last (host).
fields() { tr -d ' \n' | grep -o '"\(decode_tok_s[a-z_]*\|gpu_ms_per_replay\|lead_ms_per_replay\|host_ms_per_replay\|drafted\|accepted\)":[^,}]*' | tr '\n' ' '; }
model=/dev/shm/compare-model
[ "$(df --output=avail -B1G /dev/shm 2>/dev/null | tail -1)" -ge 40 ] 2>/dev/null || model=/tmp/compare-model
for weights in ${MODELS:-bf16 q4g64}; do
  rm -rf "$model"
  case "$weights" in
    bf16) quant=() ;;
    q*g*) bits=${weights#q}; bits=${bits%g*}; quant=(--bits "$bits" --group-size "${weights#*g}") ;;
    *) echo "gpu_compare.sh: a model is bf16 or qBITSgGROUP, not $weights" >&2; exit 2 ;;
  esac
  python3 scripts/make_random_model.py --shape llama-3-8b --out "$model" --torch-cuda "${quant[@]}" 2>&1 | tail -1
  for round in $(seq "${ROUNDS:-2}"); do
    for batch in ${BATCHES:-1}; do
      for name in "$@"; do
        # shellcheck disable=SC2086  # RUN holds several arguments
        # shellcheck disable=SC2046  # the variables are words of their own
        echo "$weights batch $batch round $round $name: $(env $(variables "$name") timeout "${RUN_TIMEOUT:-90}" \
          "/tmp/fathom-$(bundle "$name")/fathom_bench" \
          --model "$model" --device cuda --dtype bf16 $RUN --batch "$batch" 2>&1 | fields)"
      done
    done
  done
  if [ "${PROFILE:-0}" = 1 ]; then
    for name in "$@"; do
      echo "$weights $name:"
      profile="$out/profile-$weights-${name//[:=,]/_}.json"
      # shellcheck disable=SC2046
      env $(variables "$name") timeout 120 "/tmp/fathom-$(bundle "$name")/fathom_bench" --model "$model" --device cuda --dtype bf16 --synthetic-context \
        --prompt-tokens 512 --gen-tokens 64 --repeat 1 --profile-step-graph 2>/dev/null > "$profile"
      python3 scripts/graph_costs.py < "$profile" | head -24
    done
  fi
done
# KEEP_MODEL=1 leaves the last model at $model for commands after this one.
[ "${KEEP_MODEL:-0}" = 1 ] || rm -rf "$model"
echo "done after ${SECONDS} s"
