#!/bin/bash
# TCP 2 ranks broadcast: main's size rule (one piece / 64 KiB + rest after rendezvous) vs the old even 256 KiB pieces (COHORT_CHUNK_BYTES=262144), back to back and OSU, order rotated
P=${PERF:-build/tools/cohort-perf/cohort-perf}; R=${1:-6}
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) commit $(git rev-parse --short HEAD)"
for r in $(seq 1 $R); do
  for mode in b2b osu; do
    o=""; [ $mode = osu ] && o=--osu
    if [ $((r % 2)) = 0 ]; then L="rule pieces"; else L="pieces rule"; fi
    for v in $L; do
      e=AB_NOOP=1; [ $v = pieces ] && e=COHORT_CHUNK_BYTES=262144
      echo "## round $r $mode $v load $(cut -d' ' -f1 /proc/loadavg)"
      env $e timeout 120 $P --np 2 --transport tcp --coll broadcast --sizes ${SIZES:-1048576,2097152,4194304,16777216} --time 0.2 --in-place no --percentiles $o 2>&1 | grep -E '^ +[0-9]+ '
    done
  done
done
