#!/usr/bin/env python3
"""Medians per (model, threads, engine) from compare_llamacpp.sh's JSON lines, and fathom/llama.cpp ratios."""
import collections, json, statistics, sys

runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in sys.stdin:
    if line.strip().startswith("{"):
        r = json.loads(line)
        for k in ("pp512", "tg128"):
            runs[(r["model"], r["threads"])][(r["engine"], k)].append(r[k])
print("| model | threads | fathom pp512 | llama.cpp pp512 | ratio | fathom tg128 | llama.cpp tg128 | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for (model, threads), v in sorted(runs.items()):
    med = {k: statistics.median(x) for k, x in v.items()}
    fp, lp = med[("fathom", "pp512")], med[("llama.cpp", "pp512")]
    ft, lt = med[("fathom", "tg128")], med[("llama.cpp", "tg128")]
    n = len(v[("fathom", "pp512")])
    print(f"| {model} | {threads} | {fp:.1f} | {lp:.1f} | {fp/lp:.2f} | {ft:.2f} | {lt:.2f} | {ft/lt:.2f} |  <!-- {n} rounds -->")
