#!/bin/bash
# per round: c2c, then =off and =auto (and =on) runs; prints mode c2c op size oop_p50 ip_p50
P=${P:-/work/main/build-o3/tools/cohort-perf/cohort-perf}
for r in $(seq 1 ${R:-6}); do
 for m in off auto on; do
  c=$(/tmp/c2c | awk '{print $4}')
  COHORT_SHM_SINGLE_COPY=$m $P --np 2 --bind auto --coll ${OPS:-all_reduce,all_gather,all_to_all,broadcast,reduce,reduce_scatter,gather,scatter} \
    --sizes ${SIZES:-65536,262144,1048576,4194304} --time ${T:-0.2} --percentiles --json 2>/dev/null |
  python3 -c '
import json,sys
d=json.load(sys.stdin)
for x in d["results"]:
  print(sys.argv[1], sys.argv[2], sys.argv[3], x["op"], int(bool(x["in_place"])), x["size"], "%.2f %.2f" % (x["p50_us"], x["p99_us"]))' $m $r $c
 done
done
