#!/bin/bash
# TCP 2 ranks: cohort unbound vs one rank per core (--bind core), back to back and OSU, order rotated
P=${PERF:-build/tools/cohort-perf/cohort-perf}; R=${1:-6}
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) commit $(git rev-parse --short HEAD)"
for r in $(seq 1 $R); do
  for mode in b2b osu; do
    o=""; [ $mode = osu ] && o=--osu
    if [ $((r % 2)) = 0 ]; then L="none core"; else L="core none"; fi
    for b in $L; do
      echo "## round $r $mode $b load $(cut -d' ' -f1 /proc/loadavg)"
      timeout 120 $P --np 2 --transport tcp --coll broadcast --sizes 8,4096,1048576,4194304 --time 0.2 --in-place no --percentiles --bind $b $o 2>&1 | grep -E '^ +[0-9]+ '
    done
  done
done
