#!/bin/bash
A=/tmp/bcastsmall-main/build/tools/cohort-perf/cohort-perf
B=/work/wt/bcastsmall/build/tools/cohort-perf/cohort-perf
OUT=$1; mkdir -p $OUT
for i in $(seq 1 ${N:-16}); do
  order="A B"; ((i % 2)) || order="B A"
  for v in $order; do
    bin=$A; [ $v = B ] && bin=$B
    timeout 60 $bin --np ${NP:-2} --coll broadcast --sizes ${SIZES:-8,256,4096} --time ${T:-0.05} --in-place no ${EXTRA:-} --json > $OUT/np${NP:-2}.$v.$i.json 2>/dev/null || rm -f $OUT/np${NP:-2}.$v.$i.json
  done
done
