#!/bin/bash
# usage: run.sh TAG COLL SIZE N [extra env...]
P=/work/wt/cbig/build/tools/cohort-perf/cohort-perf
tag=$1 coll=$2 size=$3 n=$4; shift 4
for mode in on off; do
  d=/tmp/cbig_cg/$tag.$mode.$n; rm -rf $d; mkdir -p $d
  env "$@" valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=$d/cg.%p \
    $P --np 2 --coll $coll --sizes $size -n $n -w 2 -c 0 --in-place no --contract $mode > $d/out.txt 2> $d/err.txt
  echo "$tag $mode $n rc=$?"
done
