#!/bin/bash
# A/B of AVG by multiplication (power-of-two ranks): base (43741a25, which
# divides) against new (MODE="-o avg"; "-o sum" for the floor), alternating
# launches, both variants; prints side pair c2c op inplace size avg p50 p99
A=${A:-/tmp/b28/b/tools/cohort-perf/cohort-perf}
B=${B:-/work/main/build-o3/tools/cohort-perf/cohort-perf}
for r in $(seq 1 ${PAIRS:-4}); do
  for side in A B; do
    P=${!side}
    c=$(/tmp/c2c | awk '{print $4}')
    $P --np ${NP:-2} --bind ${BIND:-auto} --coll ${OPS:-scatter,reduce_scatter,all_to_all} \
       --sizes ${SIZES:-16,4096,65536,1048576,16777216} --time ${T:-0.3} --in-place yes \
       --percentiles $MODE --json 2>/dev/null |
      python3 -c '
import json,sys
d=json.load(sys.stdin)
for x in d["results"]:
  print(sys.argv[1], sys.argv[2], sys.argv[3], x["op"], int(bool(x["in_place"])), x["size"],
        "%.3f %.3f %.3f" % (x["avg_us"], x["p50_us"], x["p99_us"]))' $side $r $c
  done
done
