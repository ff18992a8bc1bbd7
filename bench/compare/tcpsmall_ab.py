#!/usr/bin/env python3
"""tcpsmall_ab.py OUT - summary of tcpsmall_ab.sh: per configuration, op and
size, over the pairs (round i, slot a/b: one A and one B launch each): the
median of A and B of time (cohort-perf's: the max over ranks of each rank's
mean per call) and of the per-iteration slowest rank's p50 and p99, the
median B/A of each with its range, and how many pairs B was faster/slower;
c2c p50 (ns) per configuration."""
import glob, json, os, re, statistics as S, sys
out = sys.argv[1]
res = {}
for f in glob.glob(os.path.join(out, "*.json")):
    cf, v, p = os.path.basename(f)[:-5].rsplit(".", 2)
    try:
        d = json.load(open(f))
    except Exception:
        continue
    for r in d["results"]:
        res.setdefault((cf, r["op"], r["size"]), {}).setdefault(v, {})[p] = (
            r["avg_us"], r["step_p50_us"], r["step_p99_us"])
c2c = {}
for line in open(os.path.join(out, "c2c.txt")):
    m = re.search(r"c2c \S+ \S+ (\d+)", line)
    if m:
        c2c.setdefault(line.split()[1], []).append(int(m.group(1)))
print("config op size | time A -> B, B/A [min, max], pairs B faster/slower | step p50 A -> B, B/A, faster/slower | step p99 A -> B (medians over pairs, us)")
last = None
for k in sorted(res):
    if k[0] != last:
        cc = c2c.get(k[0], [])
        print(f"== {k[0]}: c2c p50 ns over rounds: " + (f"median {S.median(cc)} [{min(cc)}..{max(cc)}]" if cc else "?"))
        last = k[0]
    a, b = res[k].get("A", {}), res[k].get("B", {})
    ps = sorted(set(a) & set(b))
    if not ps:
        continue
    cols = []
    for j in (0, 1):
        r = [b[p][j] / a[p][j] for p in ps if a[p][j]]
        fa = sum(b[p][j] < a[p][j] for p in ps)
        sl = sum(b[p][j] > a[p][j] for p in ps)
        cols.append(f"{S.median(a[p][j] for p in ps):8.2f} -> {S.median(b[p][j] for p in ps):8.2f} "
                    f"x{S.median(r):.3f} [{min(r):.2f}, {max(r):.2f}] {fa}/{sl}")
    p99 = f"{S.median(a[p][2] for p in ps):8.2f} -> {S.median(b[p][2] for p in ps):8.2f}"
    print(f"{k[0]:13s} {k[1]:10s} {k[2]:>8d} ({len(ps)} pairs) | {cols[0]} | {cols[1]} | {p99}")
