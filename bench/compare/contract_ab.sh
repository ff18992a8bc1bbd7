#!/bin/bash
# Interleaved on/off launches of cohort-perf (2 ranks, shm): the contract check's cost.
P=${P:-/tmp/cohort-perf-bench}
N=${N:-10}
OUT=${OUT:-/tmp/contract_ab}
mkdir -p $OUT
for i in $(seq 1 $N); do
  for mode in on off; do
    [ $((i % 2)) = 0 ] && mode=$([ $mode = on ] && echo off || echo on)
    $P --np 2 --coll all_reduce,broadcast,all_gather,reduce_scatter --sizes 8,65536,1048576 \
       --time 0.3 --in-place no --contract $mode --json > $OUT/$mode.$i.txt 2>/dev/null
  done
done
python3 - "$OUT" <<'PY'
import glob, json, sys, statistics as S
out = sys.argv[1]
def load(mode):
    d = {}
    for f in sorted(glob.glob(f"{out}/{mode}.*.txt")):
        i = int(f.split('.')[-2])
        for r in json.load(open(f))["results"]:
            # p50 of the launch, of the per-iteration slowest rank
            d.setdefault((r["op"], r["size"]), {})[i] = r["step_p50_us"]
    return d
on, off = load("on"), load("off")
print("op size: median over launch pairs of (on p50 - off p50), and of on/off; medians of p50 on / off")
for k in sorted(on):
    pairs = [(on[k][i], off[k][i]) for i in on[k] if i in off[k]]
    dif = S.median([a - b for a, b in pairs]); rat = S.median([a / b for a, b in pairs])
    print(f"{k[0]:15s} {k[1]:>8d}: diff {dif*1000:+8.0f} ns  ratio {rat:.3f}  on {S.median([a for a,_ in pairs]):.2f} off {S.median([b for _,b in pairs]):.2f} us  ({len(pairs)} pairs)")
PY
