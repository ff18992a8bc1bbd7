#!/usr/bin/env python3
# bench/compare/pair_ratios.py OUT A B - per-round paired ratios of variant A to variant B in a
# tcp_knobs_ab.sh run (cohort-perf --percentiles outputs OUT/<variant>.<round>.txt): for each
# config, op and size the median [min..max] over rounds of A/B of the mean time, the rounds A
# won, and the medians of the p50 and p99 ratios. tcp_knobs_ab.sh itself prints ratios to
# Open MPI only; this compares two cohort variants under the same launch conditions.
import statistics as S, sys
from ab_rows import launches, lines, perf_row
out, A, B = sys.argv[1], sys.argv[2], sys.argv[3]
d = {}
for v, r, f in launches(out):
    for cfg, op, x in lines(f):
        row = perf_row(op, x)
        if cfg and row:
            d.setdefault((cfg, op, row[0]), {}).setdefault(v, {})[r] = row[1:]
print(f"# paired per round: {A} / {B}: mean-time ratio median [min..max], wins, p50 ratio median, p99 ratio median")
for k in sorted(d):
    a, b = d[k].get(A, {}), d[k].get(B, {})
    rs = [r for r in a if r in b]
    if not rs: continue
    m = [a[r][0]/b[r][0] for r in rs]; p50 = [a[r][1]/b[r][1] for r in rs]; p99 = [a[r][2]/b[r][2] for r in rs]
    print(f"{k[0]:7} {k[1]:10} {k[2]:>8}  n={len(rs)} mean x{S.median(m):.2f} [{min(m):.2f}..{max(m):.2f}] wins {sum(x<1 for x in m)}/{len(m)}  p50 x{S.median(p50):.2f}  p99 x{S.median(p99):.2f}")
