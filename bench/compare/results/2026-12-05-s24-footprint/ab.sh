#!/bin/bash
# A/B builds: base (d7dfbab8) vs new (footprint split), broadcast after all_reduce sweep
N=${N:-4}; NP=${NP:-16}
for i in $(seq $N); do
 for v in base new; do
  if [ $v = base ]; then P=/tmp/b24/tools/cohort-perf/cohort-perf; else P=/work/main/build-o3/tools/cohort-perf/cohort-perf; fi
  $P --np $NP --coll ${COLL:-all_reduce,broadcast} --sizes ${SIZES:-8,1024,4096,8192,16384,65536,1048576,67108864} --time 0.03 --in-place no 2>&1 |
   awk -v v=$v -v c=${SHOW:-broadcast} '/^# Collective:/ {b = ($3==c)} b && $1 ~ /^[0-9]+$/ {s = s " " $1 " " $6} END {print v s}'
 done
done
