#!/usr/bin/env python3
"""tcp_gate_ab.py OUT - summary of tcp_gate_ab.sh: per configuration, op and
size, the medians over pairs of p50 and p99 (A -> B), the median of B/A of
p50 with its range, and how many pairs B was faster / slower; c2c per config."""
import glob, json, os, re, statistics as S, sys
out = sys.argv[1]
res = {}
for f in glob.glob(os.path.join(out, "*.json")):
    cf, v, i = os.path.basename(f)[:-5].rsplit(".", 2)
    try:
        d = json.load(open(f))
    except Exception:
        continue
    for r in d["results"]:
        res.setdefault((cf, r["op"], r["size"]), {}).setdefault(v, {})[i] = (r["step_p50_us"], r.get("step_p99_us"))
c2c = {}
for line in open(os.path.join(out, "c2c.txt")):
    w = line.split()
    m = re.search(r"c2c \S+ \S+ (\d+)", line)
    if m:
        c2c.setdefault(w[1], []).append(int(m.group(1)))
labels = sorted({v for k in res for v in res[k]} - {"A"})
for L in labels:
    print(f"\n#### {L} against A")
    print(f"config op size: p50 A -> {L} (median over rounds), {L}/A of p50 median [min, max], rounds {L} faster/slower, p99 A -> {L} (median)")
    last = None
    for k in sorted(res, key=lambda k: (k[0], k[1], k[2])):
        if k[0] != last:
            cc = c2c.get(k[0], [])
            print(f"== {k[0]}: c2c p50 ns over rounds: " + (f"median {S.median(cc)} [{min(cc)}..{max(cc)}]" if cc else "?"))
            last = k[0]
        a, b = res[k].get("A", {}), res[k].get(L, {})
        ps = sorted(set(a) & set(b), key=int)
        if not ps:
            continue
        r = [b[i][0] / a[i][0] for i in ps if a[i][0]]
        fa = sum(b[i][0] < a[i][0] for i in ps)
        sl = sum(b[i][0] > a[i][0] for i in ps)
        p99 = lambda x: S.median(x[i][1] for i in ps) if all(x[i][1] is not None for i in ps) else float("nan")
        print(f"{k[0]:13s} {k[1]:10s} {k[2]:>8d}: {S.median(a[i][0] for i in ps):9.2f} -> {S.median(b[i][0] for i in ps):9.2f}  "
              f"x{S.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]  {fa}/{sl} of {len(ps)}  "
              f"p99 {p99(a):9.2f} -> {p99(b):9.2f}")
