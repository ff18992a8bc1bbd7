#!/bin/sh
# interleaved A (main 57c3dd2) / B (p2p8) launches of cohort-perf sendrecv
set -eu
R=${1:-8}
for r in $(seq 1 $R); do
  for cfg in A B; do
    if [ $cfg = A ]; then p=/tmp/p2p8-base/build/tools/cohort-perf/cohort-perf; else p=/work/wt/p2p8/build/tools/cohort-perf/cohort-perf; fi
    $p --np 2 --coll sendrecv --sizes 8,64,4096 --time 0.2 --percentiles --in-place no > /tmp/p2p8-ab/$cfg.$r.txt 2>&1 || true
  done
done
python3 - $R <<'PY'
import sys, statistics as S
R=int(sys.argv[1])
def parse(p):
    rows={}
    for l in open(p):
        f=l.split()
        if len(f)==12 and f[0].isdigit(): rows[int(f[0])]=(float(f[9]),float(f[10]),float(f[11]))
    return rows
d={c:[parse(f"/tmp/p2p8-ab/{c}.{r}.txt") for r in range(1,R+1)] for c in "AB"}
for b in sorted(d["A"][0]):
    a=[x[b] for x in d["A"] if b in x]; bb=[x[b] for x in d["B"] if b in x]
    rat=[y[0]/x[0] for x,y in zip(a,bb)]
    m=lambda v,i:S.median([x[i] for x in v])
    print(f"{b:>6} A p50/p99/max {m(a,0):.2f}/{m(a,1):.2f}/{m(a,2):.1f}  B {m(bb,0):.2f}/{m(bb,1):.2f}/{m(bb,2):.1f}  B/A p50 median x{S.median(rat):.2f} ({min(rat):.2f}-{max(rat):.2f}) n={len(rat)}")
PY
