#!/bin/bash
name=$1; size=$2; shift 2
P=${PERF:-/work/wt/tcp1p/build/tools/cohort-perf/cohort-perf}
out=/tmp/tcp1p/ss-$name-$size.txt; : > $out
env "$@" timeout 60 $P --np 2 --transport tcp --coll broadcast --sizes $size --time 2 --in-place no --percentiles -w 50 > /tmp/tcp1p/ssperf-$name-$size.txt 2>&1 &
pid=$!
sleep 0.6
while kill -0 $pid 2>/dev/null; do ss -tmnipHO state established 2>/dev/null | grep cohort-perf >> $out; sleep 0.005; done
grep -E '^ +[0-9]+ ' /tmp/tcp1p/ssperf-$name-$size.txt
