#!/bin/bash
# Paired A/B of the tcp data path's handshake tick (9b5f76dd): A = bd451a75
# (no tick), B = the build after; 2 ranks over tcp loopback, small
# all_reduce and broadcast, where a clock read per pass would show.
A=${A:-/tmp/bT/b/tools/cohort-perf/cohort-perf}
B=${B:-/work/main/build-o3/tools/cohort-perf/cohort-perf}
OUT=${OUT:-/tmp/s30/tick.txt}
rows=$(cd "$(dirname "$0")" && pwd)/../2026-12-05-s29-xcore/json_rows.py
for r in $(seq 1 ${PAIRS:-4}); do
  if [ $((r % 2)) = 0 ]; then order="A B"; else order="B A"; fi
  for side in $order; do
    if [ $side = A ]; then P=$A; else P=$B; fi
    $P --np 2 --transport tcp --coll all_reduce,broadcast --sizes 8,4096,65536 --time 0.5 \
       --in-place no --percentiles --json 2>/dev/null | python3 $rows $side $r 0 >> $OUT
  done
done
