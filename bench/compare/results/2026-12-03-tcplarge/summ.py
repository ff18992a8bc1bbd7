#!/usr/bin/env python3
# summ.py FILE BASE: per mode and size, each variant's per-round ratio to BASE (same round,
# same mode) of time/p50/p99: median [min..max] and rounds where the variant was lower.
import statistics as S, sys
d = {}
base = sys.argv[2]
for b in open(sys.argv[1]).read().split('## round ')[1:]:
    r, mode, v = b.split('\n')[0].split()[:3]
    for l in b.split('\n')[1:]:
        x = l.split()
        if x and x[0].isdigit() and len(x) >= 12:
            d.setdefault((mode, int(x[0])), {}).setdefault(r, {})[v] = (float(x[5]), float(x[9]), float(x[10]))
for key in sorted(d):
    mode, sz = key
    rows = d[key]
    vs = sorted({v for r in rows for v in rows[r]})
    med = lambda v, i: S.median([rows[r][v][i] for r in rows if v in rows[r]])
    for v in vs:
        print(f"{mode} {sz:>9} {v:>8}: time {med(v,0):8.1f} p50 {med(v,1):8.1f} p99 {med(v,2):8.1f} us (median over rounds)")
    for v in vs:
        if v == base:
            continue
        rs = [r for r in rows if v in rows[r] and base in rows[r]]
        out = []
        for i, n in ((0, 'time'), (1, 'p50'), (2, 'p99')):
            rat = [rows[r][v][i] / rows[r][base][i] for r in rs]
            out.append(f"{n} x{S.median(rat):.3f} [{min(rat):.2f}..{max(rat):.2f}] lower {sum(x < 1 for x in rat)}/{len(rat)}")
        print(f"{mode} {sz:>9} {v}/{base}: " + "  ".join(out))
