#!/bin/bash
# Session 28's A/B: base A (default 43741a25: the API copies an in-place
# scatter/reduce_scatter/all_to_all's input aside, AVG divides in a second
# pass) against new B, alternating launches, both variants; MODE adds
# cohort-perf options ("-o avg" for ../2026-12-05-s28-avg). Prints
# side pair c2c op inplace size avg p50 p99; sum.py summarises.
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
