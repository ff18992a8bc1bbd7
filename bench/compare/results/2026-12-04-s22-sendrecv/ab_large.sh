#!/bin/bash
# interleaved A/B of send/recv: base auto (two copies), base on (whole single copy), new on (split)
cd /work/main
R=${R:-3}
SZ=65536,262144,1048576,4194304,16777216
for r in $(seq 1 $R); do
 for v in base_auto base_on new_on; do
  lib=${v%_*}; m=${v#*_}
  if [ $lib = base ]; then P=/tmp/base/tools/cohort-perf/cohort-perf; F=/tmp/ab/fresh_base; else P=build-o3/tools/cohort-perf/cohort-perf; F=/tmp/ab/fresh_new; fi
  COHORT_SHM_SINGLE_COPY=$m $P --np 2 --bind auto --transport shm --coll sendrecv --sizes $SZ --percentiles --time 0.2 2>&1 | awk -v v=$v -v r=$r '$1 ~ /^[0-9]+$/ {print v, "r"r, $1, "oop", $14, $15, "ip", $17, $18}'
  for b in 65536 262144 1048576 4194304 16777216; do
    echo "$v r$r fresh $(COHORT_SHM_SINGLE_COPY=$m COHORT_TRANSPORT=shm build-o3/tools/cohortrun/cohortrun -n 2 --bind-to auto $F send $b 300 2>/dev/null)"
  done
 done
done
