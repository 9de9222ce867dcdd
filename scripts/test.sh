#!/usr/bin/env bash
# The test command: set up, build, run every test: ctest (C++ unit, parity and CLI
# tests), then the end-to-end tests (node:test with the official OpenAI and
# Anthropic clients against build/fathom serve, the chat page in headless Chromium,
# and fathom chat in a pseudo-terminal), then the sanitizer runs
# (scripts/sanitize.sh: ASan + UBSan over all of that plus the fuzz corpora,
# ThreadSanitizer over the thread pool and the server). Prints each part's
# summary; the last line adds them all up in ctest's format.
# Exits non-zero if any test fails.
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    without the sanitizer runs
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
scripts/setup.sh build
built_at=$SECONDS
root=$(pwd)
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# The chat page's browser tests drive Debian's Chromium; where it cannot be
# installed they are skipped, by name, in the report (tests/webui/browser.mjs).
if ! scripts/install_packages.sh chromium; then
  echo "test: Debian's chromium could not be installed: the chat page's browser tests will be skipped"
fi

set +e
(cd build && ctest --output-on-failure -j2 --timeout 600) 2>&1 | tee "$log/ctest"
ctest_rc=${PIPESTATUS[0]}
ctest_at=$SECONDS
echo
echo "end-to-end tests (tests/server; the chat page in Chromium, tests/webui; fathom chat in a terminal, tests/cli):"
(cd tests/server && FATHOM_BINARY="$root/build/fathom" node --test --test-concurrency=1 --test-reporter=spec \
  api.test.mjs errors.test.mjs load.test.mjs hardening.test.mjs memory.test.mjs speculation.test.mjs batching.test.mjs prefix_cache.test.mjs api_surface.test.mjs \
  structured_output.test.mjs responses.test.mjs agent_clients.test.mjs \
  ../webui/chat_page.test.mjs ../cli/chat.test.mjs) 2>&1 | tee "$log/node"
node_rc=${PIPESTATUS[0]}
node_at=$SECONDS
sanitize_total=0; sanitize_failed=0
if [ "$quick" -eq 0 ]; then
  echo
  echo "sanitizer runs (scripts/sanitize.sh):"
  FATHOM_SANITIZE_SUMMARY="$log/sanitize" scripts/sanitize.sh
  sanitize_rc=$?
  touch "$log/sanitize"
  sanitize_total=$(awk '{s += $2} END {print s + 0}' "$log/sanitize")
  sanitize_failed=$(awk '{s += $3} END {print s + 0}' "$log/sanitize")
  [ "$sanitize_rc" -ne 0 ] && [ "$sanitize_failed" -eq 0 ] && sanitize_failed=1 && sanitize_total=$((sanitize_total + 1))
fi
set -e

ctest_line=$(grep -E '[0-9]+% tests passed' "$log/ctest" | tail -n 1 || true)
ctest_total=$(sed -nE 's/.* out of ([0-9]+).*/\1/p' <<<"$ctest_line")
ctest_failed=$(sed -nE 's/.* ([0-9]+) tests? failed.*/\1/p' <<<"$ctest_line")
node_total=$(sed -nE 's/^ℹ tests ([0-9]+).*/\1/p' "$log/node" | tail -n 1)
node_failed=$(sed -nE 's/^ℹ fail ([0-9]+).*/\1/p' "$log/node" | tail -n 1)
ctest_total=${ctest_total:-0}; ctest_failed=${ctest_failed:-0}; node_total=${node_total:-0}; node_failed=${node_failed:-0}
# A runner that died without a summary counts as one failure.
[ "$ctest_rc" -ne 0 ] && [ "$ctest_failed" -eq 0 ] && ctest_failed=1 && ctest_total=$((ctest_total > 0 ? ctest_total : 1))
[ "$node_rc" -ne 0 ] && [ "$node_failed" -eq 0 ] && node_failed=1 && node_total=$((node_total > 0 ? node_total : 1))
total=$((ctest_total + node_total + sanitize_total))
failed=$((ctest_failed + node_failed + sanitize_failed))
percent=$(( total > 0 ? (100 * (total - failed)) / total : 0 ))
echo
echo "ctest: ${ctest_line:-no summary}"
echo "node e2e: tests $node_total, pass $((node_total - node_failed)), fail $node_failed (chat page screenshots: build/test-artifacts/webui/)"
[ "$quick" -eq 0 ] && echo "sanitizers: $sanitize_total checks, $sanitize_failed failed ($(tr '\n' ';' <"$log/sanitize"))"
# Where the time went (the CI's limit is on the whole).
echo "time: set-up and build ${built_at} s, ctest $((ctest_at - built_at)) s, end-to-end $((node_at - ctest_at)) s," \
  "sanitizer runs $((SECONDS - node_at)) s; ${SECONDS} s in all"
echo "${percent}% tests passed, ${failed} tests failed out of ${total} (ctest ${ctest_total}, server e2e ${node_total}, sanitizers ${sanitize_total})"
[ "$failed" -eq 0 ]
