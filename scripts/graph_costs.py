# Prints what `fathom_bench --profile-step-graph` (and --profile-ops) reported:
# the host's and the GPU's time per replayed step, each kernel's cost inside the
# step's graph, and with --profile-ops the host's time per op while recording.
import json, sys
r = json.loads(sys.stdin.read())
g = r.get("step_graphs", {})
print("decode %.1f tok/s; per replayed step: host %.3f ms (%.3f before the GPU starts), gpu %.3f ms" %
      (r["decode_tok_s"], g.get("host_ms_per_replay", 0), g.get("lead_ms_per_replay", 0),
       g.get("gpu_ms_per_replay", 0)))
c = r.get("step_graph_costs")
if c:
    print("graph alone %.3f ms; without each kernel:" % c["whole_ms"])
    for k in sorted(c["kernels"], key=lambda k: -k["ms_saved"]):
        print("  %-70s %4d nodes %8.3f ms" % (k["kernel"][:70], k["nodes"], k["ms_saved"]))
ops = r.get("decode_ops")
if ops:
    print("host per token while recording; outside the ops %.3f ms" % r["decode_outside_ops_ms_per_token"])
    for name, e in sorted(ops.items(), key=lambda kv: -kv[1]["ms_per_token"])[:12]:
        print("  %-45s %8.3f ms %6.1f calls" % (name, e["ms_per_token"], e["calls_per_token"]))
