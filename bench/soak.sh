#!/usr/bin/env bash
# A bounded soak of the server: 64 concurrent clients for 10 minutes against the
# trained model, mixing normal streaming and non-streaming chats, abandoned
# streams, malformed bodies, slowly trickled headers and 3.5 MiB prompts
# (bench/soak.mjs). Passes when no request ended in an unexpected way, the
# server still answers, and its RSS after warm-up grew by at most MARGIN_MIB.
#
# bench/soak.sh [SECONDS] [CLIENTS]     (defaults 600 and 64; MARGIN_MIB=32)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
clients=${2:-64}
margin=${MARGIN_MIB:-32}
model=${MODEL:-assets/models/fathom-chat-small}
[ -x build/fathom ] || scripts/setup.sh build >/dev/null

log=$(mktemp)
report=$(mktemp)
build/fathom serve --model "$model" --port 0 --max-queue 256 >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log" "$report"' EXIT
for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.2; done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1)
[ -n "$url" ] || { cat "$log"; echo "soak: the server did not start"; exit 1; }

echo "soak: $clients clients for $seconds s against $model at $url" >&2
node bench/soak.mjs --url "$url" --pid "$server" --seconds "$seconds" --clients "$clients" >"$report"
cat "$report"
alive=$(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true)
python3 - "$report" "$alive" "$margin" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
alive, margin = sys.argv[2], float(sys.argv[3])
ok = alive == "200" and not r["unexpected"] and r["rss_mib"]["growth_after_warmup"] <= margin
print(f"soak: {r['requests']} requests in {r['seconds']} s with {r['clients']} clients; "
      f"p50/p99 latency {r['latency_s']['p50']}/{r['latency_s']['p99']} s; "
      f"RSS {r['rss_mib']['start']} → {r['rss_mib']['after_warmup']} (warm) → {r['rss_mib']['end']} MiB "
      f"(growth after warm-up {r['rss_mib']['growth_after_warmup']} MiB, margin {margin:g}); "
      f"unexpected {r['unexpected'] or 'none'}; health {alive}: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
