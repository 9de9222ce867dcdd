# Where a decode step's GPU time goes while its kernels overlap: reads the CSV
# of bench/kernel_timeline.cpp (start_ns,end_ns,graph_node,name), cuts it into
# steps at a marker kernel (the step's last: the greedy pick by default), and
# charges each kernel of a step the time from the latest end before it (in
# order of start) to its own end: the critical path. A kernel that starts
# early (programmatic dependent launch) is charged only its part after the
# kernel before it has ended.
#   python3 scripts/timeline_costs.py timeline.csv [--marker argmax_pick] [--steps 20] [--show 40:60]
import argparse, collections, csv, re, statistics

p = argparse.ArgumentParser()
p.add_argument("csv")
p.add_argument("--marker", default="argmax_pick")
p.add_argument("--steps", type=int, default=20, help="the last N steps of the most common length")
p.add_argument("--show", default="", help="kernels FIRST:LAST of the middle step, one a line")
p.add_argument("--layer", default="attention_decode", help="a kernel once a layer: the step folded into one layer")
a = p.parse_args()


def short(name):
    name = re.sub(r"^void |\(anonymous namespace\)::|fathom::cuda::|fathom::", "", name)
    return re.sub(r"\([^()]*\)$", "", name)[:60]  # without the parameters


rows = []
with open(a.csv) as f:
    for r in csv.DictReader(f):
        rows.append((int(r["start_ns"]), int(r["end_ns"]), short(r["name"])))
rows.sort()
steps, current = [], []
for r in rows:
    current.append(r)
    if a.marker in r[2]:
        steps.append(current)
        current = []
lengths = collections.Counter(len(s) for s in steps[1:])
if not lengths:
    raise SystemExit("no step ends at a kernel named like %r" % a.marker)
common = lengths.most_common(1)[0][0]
# (index, step) of the last --steps steps of the common length; each charged
# from the end of the step before it.
chosen = [(i, s) for i, s in enumerate(steps) if i > 0 and len(s) == common][-a.steps:]
print("%d steps of %d kernels (lengths seen: %s); the last %d taken" %
      (len(steps), common, dict(lengths.most_common(4)), len(chosen)))


def charges(step, before_end):
    out, latest = [], before_end
    for start, end, name in step:
        out.append((name, start - latest, end - start, max(0, end - latest)))
        latest = max(latest, end)
    return out


charged = [charges(s, steps[i - 1][-1][1]) for i, s in chosen]
step_ms = [(s[-1][1] - steps[i - 1][-1][1]) / 1e6 for i, s in chosen]
per_name = collections.defaultdict(list)
for c in charged:
    totals = collections.defaultdict(lambda: [0, 0, 0])
    for name, gap, dur, charge in c:
        t = totals[name]
        t[0] += 1
        t[1] += charge
        t[2] += dur
    for name, t in totals.items():
        per_name[name].append(t)
print("step: median %.3f ms from the end of the step before to the marker's end" % statistics.median(step_ms))
print("%-60s %6s %10s %10s %9s" % ("kernel", "a step", "charged ms", "busy ms", "µs each"))
for name, ts in sorted(per_name.items(), key=lambda kv: -statistics.median(t[1] for t in kv[1])):
    n = ts[0][0]
    total = statistics.median(t[1] for t in ts) / 1e6
    busy = statistics.median(t[2] for t in ts) / 1e6
    print("%-60s %6d %10.3f %10.3f %9.2f" % (name, n, total, busy, total * 1e3 / n))
if a.show:
    first, last = (int(v) for v in a.show.split(":"))
    c = charged[len(chosen) // 2]
    print("middle step, kernels %d-%d: start after the latest end before (µs; < 0: overlap), busy, charged" % (first, last))
    for k in range(first, min(last, len(c))):
        name, gap, dur, charge = c[k]
        print("  %4d %-60s %8.2f %8.2f %8.2f" % (k, name, gap / 1e3, dur / 1e3, charge / 1e3))

# The step folded into one layer: kernels between one layer's `--layer`
# kernel and the next, each slot's charge averaged over the layers.
marks = [k for k, r in enumerate(chosen[0][1]) if a.layer in r[2]]
if len(marks) > 2:
    period = marks[1] - marks[0]
    if all(m2 - m1 == period for m1, m2 in zip(marks, marks[1:])):
        slots = collections.defaultdict(list)
        for c in charged:
            for m in marks[:-1]:
                for j in range(period):
                    slots[j].append(c[m + j])
        print("one layer (%d kernels from %s on, %d layers): mean start gap, busy, charged µs" %
              (period, a.layer, len(marks) - 1))
        total = 0.0
        for j in range(period):
            v = slots[j]
            charge = statistics.mean(x[3] for x in v) / 1e3
            total += charge
            print("  %2d %-60s %8.2f %8.2f %8.2f" % (j, v[0][0], statistics.mean(x[1] for x in v) / 1e3,
                                                     statistics.mean(x[2] for x in v) / 1e3, charge))
        print("  a layer: %.2f µs" % total)
