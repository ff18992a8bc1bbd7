#!/bin/bash
cd /work/main
SZ=8192,16384,32768,49152,65536
for r in 1 2 3; do
 for v in base_auto new_on; do
  lib=${v%_*}; m=${v#*_}
  if [ $lib = base ]; then P=/tmp/base/tools/cohort-perf/cohort-perf; F=/tmp/ab/fresh_base; else P=build-o3/tools/cohort-perf/cohort-perf; F=/tmp/ab/fresh_new; fi
  COHORT_SHM_SINGLE_COPY_BYTES=8192 COHORT_SHM_SINGLE_COPY=$m $P --np 2 --bind auto --transport shm --coll sendrecv --sizes $SZ --percentiles --time 0.2 2>&1 | awk -v v=$v -v r=$r '$1 ~ /^[0-9]+$/ {print v, "r"r, $1, "oop", $14, $15, "ip", $17, $18}'
  for b in 8192 16384 32768 49152 65536; do
    echo "$v r$r fresh $(COHORT_SHM_SINGLE_COPY_BYTES=8192 COHORT_SHM_SINGLE_COPY=$m COHORT_TRANSPORT=shm build-o3/tools/cohortrun/cohortrun -n 2 --bind-to auto $F send $b 1000 2>/dev/null)"
  done
 done
done
