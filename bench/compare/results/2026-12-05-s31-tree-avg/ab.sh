#!/bin/bash
# Paired A/B, 3 ranks over tcp (loopback), float32 reduce by the binomial
# tree: A = the build before (the root divides an AVG by a pass after the
# call), B = the root dividing each piece once its last child is folded in.
# PAIRS interleaved launches, order alternating; OPS=sum is the control.
# Rows: side pair op in_place size avg p50 p99 (us).
A=${A:-/tmp/bA/b/tools/cohort-perf/cohort-perf}
B=${B:-/work/main/build-o3/tools/cohort-perf/cohort-perf}
OUT=${OUT:-/tmp/s31/tree_avg.txt}
rows=$(cd "$(dirname "$0")" && pwd)/../2026-12-05-s29-xcore/json_rows.py
mkdir -p "$(dirname "$OUT")"
for r in $(seq 1 ${PAIRS:-5}); do
  if [ $((r % 2)) = 0 ]; then order="A B"; else order="B A"; fi
  for side in $order; do
    if [ $side = A ]; then P=$A; else P=$B; fi
    $P --np ${NP:-3} --transport tcp --coll reduce --algo tree --datatype float \
       --op ${OPS:-avg} --sizes ${SIZES:-1048576,4194304,16777216} --time ${T:-0.5} --in-place ${IP:-no} \
       --percentiles --json 2>/dev/null | python3 $rows $side $r 0 >> $OUT
  done
done
