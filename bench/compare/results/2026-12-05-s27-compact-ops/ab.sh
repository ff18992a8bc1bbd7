#!/bin/bash
# A/B: base (7142b285) vs new, alternating launches; prints op size avg_us per launch
A=/tmp/b27/b/tools/cohort-perf/cohort-perf
B=/work/main/build-o3/tools/cohort-perf/cohort-perf
MODE=${MODE:-}
for r in $(seq 1 ${PAIRS:-6}); do
  for side in A B; do
    P=${!side}
    c=$(/tmp/c2c | awk '{print $4}')
    $P --np 2 --coll ${OPS:-gather,scatter,reduce,broadcast} --sizes ${SIZES:-8,16,64} --time ${T:-0.3} --in-place no $MODE --json 2>/dev/null |
      python3 -c '
import json,sys
d=json.load(sys.stdin)
for x in d["results"]:
  if not x.get("in_place"): print(sys.argv[1], sys.argv[2], sys.argv[3], x["op"], x["size"], "%.3f"%x["avg_us"])' $side $r $c
  done
done
