#!/usr/bin/env python3
"""Medians per (model, threads, engine) from compare_llamacpp.sh's JSON lines, and fathom/llama.cpp ratios."""
import collections, json, statistics, sys

KEYS = ("pp512", "tg128_d0", "tg128_d512")
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in sys.stdin:
    if line.strip().startswith("{"):
        r = json.loads(line)
        for k in KEYS:
            runs[(r["model"], r["threads"])][(r["engine"], k)].append(r[k])
print("| model | threads | " + " | ".join(f"fathom {k} | llama.cpp {k} | ratio" for k in KEYS) + " |")
print("| --- | --- |" + " --- | --- | --- |" * len(KEYS))
for (model, threads), v in sorted(runs.items()):
    med = {k: statistics.median(x) for k, x in v.items()}
    cells = []
    for k in KEYS:
        f, l = med[("fathom", k)], med[("llama.cpp", k)]
        cells.append(f"{f:.1f} | {l:.1f} | {f / l:.2f}")
    n = len(v[("fathom", "pp512")])
    print(f"| {model} | {threads} | " + " | ".join(cells) + f" |  <!-- {n} rounds -->")
