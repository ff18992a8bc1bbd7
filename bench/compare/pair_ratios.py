#!/usr/bin/env python3
# bench/compare/pair_ratios.py OUT A B - per-round paired ratios of variant A to variant B in a
# tcp_knobs_ab.sh run (cohort-perf --percentiles outputs OUT/<variant>.<round>.txt): for each
# config, op and size the median [min..max] over rounds of A/B of the mean time, the rounds A
# won, and the medians of the p50 and p99 ratios. tcp_knobs_ab.sh itself prints ratios to
# Open MPI only; this compares two cohort variants under the same launch conditions.
import glob, os, re, statistics as S, sys
out, A, B = sys.argv[1], sys.argv[2], sys.argv[3]
d = {}
for f in sorted(glob.glob(os.path.join(out, "*.*.txt"))):
    v, r = os.path.basename(f)[:-4].rsplit(".", 1)
    cfg = op = None
    for l in open(f, errors="replace"):
        m = re.match(r"## config (\S+)", l)
        if m: cfg = m.group(1); continue
        m = re.match(r"# Collective: (\S+)", l)
        if m: op = m.group(1); continue
        x = l.split()
        if x and cfg and x[0].isdigit() and len(x) >= 12 and op:
            d.setdefault((cfg, op, int(x[0])), {}).setdefault(v, {})[r] = (float(x[5]), float(x[9]), float(x[10]))
print(f"# paired per round: {A} / {B}: mean-time ratio median [min..max], wins, p50 ratio median, p99 ratio median")
for k in sorted(d):
    a, b = d[k].get(A, {}), d[k].get(B, {})
    rs = [r for r in a if r in b]
    if not rs: continue
    m = [a[r][0]/b[r][0] for r in rs]; p50 = [a[r][1]/b[r][1] for r in rs]; p99 = [a[r][2]/b[r][2] for r in rs]
    print(f"{k[0]:7} {k[1]:10} {k[2]:>8}  n={len(rs)} mean x{S.median(m):.2f} [{min(m):.2f}..{max(m):.2f}] wins {sum(x<1 for x in m)}/{len(m)}  p50 x{S.median(p50):.2f}  p99 x{S.median(p99):.2f}")
