# What a kernel's warps spend their instructions on: reads the CSV of ncu's
# source page (warp instructions executed per SASS line) and prints the total,
# the opcodes weighted by how often they ran, and how many lines ran how many
# times (lines run once a warp are a kernel's prologue; those run once a step
# are its loop). With --listing, every line with its count, in address order.
#   ncu -k regex:KERNEL --launch-skip N --launch-count 1 --section SourceCounters \
#       --page source --print-source sass --csv APP ARGS > src.csv
#   python3 scripts/ncu_source_counts.py src.csv [--top 40] [--listing]
import argparse, collections, csv, re, sys

p = argparse.ArgumentParser()
p.add_argument("csv")
p.add_argument("--top", type=int, default=40, help="opcodes to print")
p.add_argument("--listing", action="store_true", help="every SASS line with its count")
args = p.parse_args()

rows = list(csv.reader(open(args.csv, errors="replace")))
# ncu prints the application's own output first: the table starts at its header.
header_at = next((i for i, r in enumerate(rows) if "Source" in [c.strip() for c in r]), None)
if header_at is None:
    sys.exit(f"ncu_source_counts: no source table (a 'Source' column) in {args.csv}")
header = rows[header_at]
source, executed = header.index("Source"), header.index("Instructions Executed")

lines = []  # (count, SASS text)
for r in rows[header_at + 1:]:
    if len(r) <= max(source, executed):
        continue
    try:
        count = float(r[executed].replace(",", ""))
    except ValueError:
        continue
    lines.append((count, r[source].strip()))
if not lines:
    sys.exit(f"ncu_source_counts: the source table of {args.csv} has no counted lines")

total = sum(c for c, _ in lines)
opcodes, runs = collections.Counter(), collections.defaultdict(lambda: [0, 0.0])
for count, text in lines:
    opcode = re.sub(r"^@!?U?P\w+\s+", "", text).split(" ")[0].split(".")[0]  # no predicate, no modifiers
    opcodes[opcode] += count
    runs[count][0] += 1
    runs[count][1] += count
print(f"warp instructions executed: {total:,.0f}")
for opcode, count in opcodes.most_common(args.top):
    print(f"  {opcode:10s} {count:14,.0f} {100 * count / total:5.1f}%")
print("lines by how often they ran (count: lines, share of the total):")
for count, (n, executed_there) in sorted(runs.items()):
    if executed_there >= 0.01 * total:
        print(f"  {count:10,.0f}: {n:5d} lines, {100 * executed_there / total:5.1f}%")
if args.listing:
    for count, text in lines:
        print(f"{count:10,.0f}  {text}")
