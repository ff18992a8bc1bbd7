#!/bin/bash
# near-gated, 2 ranks apart: gather and scatter by two copies
# (COHORT_SHM_SINGLE_COPY=off) against single copy (COHORT_SHM_XCORE=far, the
# path they take now), the line round trip (/tmp/c2c, bench/compare/c2c.c)
# read before and after each launch; a pair counts only when all four reads
# are near (< 150 ns). Sides alternate which runs first.
# Rows: side pair c2c(max of before/after) op in_place size avg p50 p99
P=${P:-/work/main/build-o3/tools/cohort-perf/cohort-perf}
OUT=${OUT:-/tmp/s30}; mkdir -p $OUT
here=$(cd "$(dirname "$0")" && pwd)
rows=$here/../2026-12-05-s29-xcore/json_rows.py
end=$(( $(date +%s) + ${MIN:-20}*60 )); r=0
c2c() { /tmp/c2c 0 1 20 | awk '{print $4}'; }
while [ $(date +%s) -lt $end ]; do
 for op in gather scatter; do
  c=$(c2c); echo "$(date +%T) c2c $c" >> $OUT/gs_near.log
  [ "$c" -lt 150 ] || { sleep 3; continue; }
  r=$((r+1))
  if [ $((r % 2)) = 0 ]; then order="two one"; else order="one two"; fi
  for side in $order; do
    if [ $side = two ]; then E="COHORT_SHM_SINGLE_COPY=off"; else E="COHORT_SHM_XCORE=far"; fi
    c0=$(c2c)
    env $E $P --np 2 --bind auto --coll $op --sizes 65536,262144,1048576,4194304 --time 0.1 \
       --in-place yes --percentiles --json 2>/dev/null > $OUT/last.json
    c1=$(c2c); cm=$(( c0 > c1 ? c0 : c1 ))
    echo "$(date +%T) pair $r $op $side c2c $c0 $c1" >> $OUT/gs_near.log
    python3 $rows $side $r $cm < $OUT/last.json >> $OUT/gs_near.txt
  done
 done
done
