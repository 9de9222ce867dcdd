#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan) in build-fuzz and runs them.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   fuzz each target SECONDS (default 60) on a copy of
#                                           its seed corpus (tests/fuzz/corpus/<target>); new
#                                           inputs stay in the work folder, not in git
#   scripts/fuzz.sh --regress [TARGET...]   run every committed corpus file (crash-* included)
#                                           once: the CI check, a minute or so after the build
#
# Options: --no-build (use build-fuzz as it is). Environment: FUZZ_WORK_DIR (default: a new
# /tmp/fathom-fuzz.XXXX, kept when a target fails or FUZZ_KEEP=1), FUZZ_BUILD_DIR (build-fuzz),
# FATHOM_FUZZ_TOKENIZER_DIR (the tokenizer fuzz_tokenizer_encode loads; default .cache/tokenizers/qwen3).
# A crash, leak, UB report, timeout (>10 s) or OOM (>2 GiB) fails its target; exits non-zero if any did.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=fuzz
seconds=60
build=1
selected=()
for arg in "$@"; do
  case "$arg" in
    --regress) mode=regress ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    [0-9]*) seconds=$arg ;;
    fuzz_*) selected+=("$arg") ;;
    *) echo "fuzz.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

all_targets=(fuzz_safetensors_header fuzz_model_config fuzz_tokenizer fuzz_tokenizer_encode fuzz_jinja
             fuzz_openai_request fuzz_anthropic_request fuzz_tool_calls fuzz_sse fuzz_json_schema)
targets=("${selected[@]:-${all_targets[@]}}")
# The longest input libFuzzer makes per target (and at least the largest seed, which it would cut).
declare -A max_len=(
  [fuzz_safetensors_header]=4096 [fuzz_model_config]=4096 [fuzz_tokenizer]=12288
  [fuzz_tokenizer_encode]=2048 [fuzz_jinja]=20480 [fuzz_openai_request]=8192
  [fuzz_anthropic_request]=8192 [fuzz_tool_calls]=4096 [fuzz_sse]=4096 [fuzz_json_schema]=4096)
declare -A dict=([fuzz_jinja]=jinja.dict [fuzz_openai_request]=request.dict [fuzz_anthropic_request]=request.dict
                 [fuzz_model_config]=request.dict [fuzz_safetensors_header]=request.dict
                 [fuzz_json_schema]=schema.dict)

build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
if [ "$build" = 1 ]; then
  scripts/install_packages.sh clang libclang-rt-14-dev cmake ninja-build pkg-config nlohmann-json3-dev \
    libcli11-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev
  if [ ! -f "$build_dir/build.ninja" ]; then
    CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFATHOM_FUZZ=ON -DFATHOM_BUILD_TESTS=OFF -DFATHOM_CUDA=OFF >/dev/null
  fi
  start=$SECONDS
  ninja -C "$build_dir" -j"${FUZZ_BUILD_JOBS:-$(nproc)}" "${targets[@]}"
  echo "fuzz: build took $((SECONDS - start)) s"
fi

for t in "${targets[@]}"; do
  if [ "$t" = fuzz_tokenizer_encode ] && [ -z "${FATHOM_FUZZ_TOKENIZER_DIR:-}" ] &&
     [ ! -f .cache/tokenizers/qwen3/tokenizer.json ]; then
    scripts/fetch_tokenizers.sh || echo "fuzz: fetch_tokenizers.sh failed; fuzz_tokenizer_encode will fail" >&2
  fi
done

work=${FUZZ_WORK_DIR:-$(mktemp -d /tmp/fathom-fuzz.XXXX)}
mkdir -p "$work"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}

passed=0
failed=0
summary=()
for t in "${targets[@]}"; do
  bin="$root/$build_dir/tests/fuzz/$t"
  seeds="$root/tests/fuzz/corpus/$t"
  dir="$work/$t"
  mkdir -p "$dir"
  log="$dir/log.txt"
  flags=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$dir/")
  if [ "$mode" = regress ]; then
    files=("$seeds"/*)
    start=$SECONDS
    if "$bin" "${flags[@]}" "${files[@]}" >"$log" 2>&1; then status=0; else status=$?; fi
    line="$t: ${#files[@]} corpus files in $((SECONDS - start)) s"
  else
    # Known crashes (crash-*) are for --regress; leaving them out lets fuzzing go past them.
    mkdir -p "$dir/corpus"
    find "$seeds" -maxdepth 1 -type f ! -name 'crash-*' -exec cp {} "$dir/corpus/" \;
    before=$(find "$dir/corpus" -type f | wc -l)
    d=()
    [ -n "${dict[$t]:-}" ] && d=(-dict="$root/tests/fuzz/${dict[$t]}")
    if "$bin" "${flags[@]}" "${d[@]}" -max_len="${max_len[$t]}" -max_total_time="$seconds" \
        -print_final_stats=1 "$dir/corpus" >"$log" 2>&1; then status=0; else status=$?; fi
    after=$(find "$dir/corpus" -type f | wc -l)
    # A log without these lines (a target that died at once) must not end the script under
    # set -e / pipefail before its FAIL line: grep finding nothing exits 1.
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
    cov=$( (grep -oE '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" || true) | tail -1 |
          sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+)/cov \1 ft \2/')
    line="$t: ${runs:-?} runs in ${seconds} s, ${cov:-cov ?}, corpus $before -> $after"
  fi
  artifacts=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
              -o -name 'oom-*' \) | head -3 | tr '\n' ' ')
  if [ "$status" -eq 0 ] && [ -z "$artifacts" ]; then
    passed=$((passed + 1))
    summary+=("PASS $line")
  else
    failed=$((failed + 1))
    reason=$(grep -m1 -E 'what\(\):|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FUZZ_CHECK failed|^==[0-9]+== ?ERROR|fuzz_tokenizer_encode: cannot' "$log" || true)
    summary+=("FAIL $line (exit $status) ${reason:0:160} ${artifacts:+artifacts: $artifacts}log: $log")
  fi
  echo "${summary[-1]}"
done

echo
printf '%s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
if [ "$failed" -eq 0 ] && [ "${FUZZ_KEEP:-0}" != 1 ] && [ -z "${FUZZ_WORK_DIR:-}" ]; then
  rm -rf "$work"
else
  echo "fuzz: work folder $work"
fi
[ "$failed" -eq 0 ]
