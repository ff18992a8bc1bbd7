#!/bin/bash
# Paired interleaved A/B of two builds of store_bench + cohort-store:
#   ab.sh BASE_BUILD_DIR NEW_BUILD_DIR   (raw lines to $OUT, default /tmp/store-ab.jsonl)
B=${1:?base build dir}; N=${2:?new build dir}
OUT=${OUT:-/tmp/store-ab.jsonl}; : > $OUT
run() { # one JSON line: {"build", "load", "r": store_bench's line}
  local tag=$1 d=$2; shift 2
  local load r
  load=$(cut -d' ' -f1 /proc/loadavg)
  r=$(timeout 120 $d/bench/store/store_bench --store-bin $d/tools/cohort-store/cohort-store "$@" | tail -1)
  [ -n "$r" ] && echo "{\"build\": \"$tag\", \"load\": \"$load\", \"r\": $r}" >> $OUT
}
for rep in 1 2 3 4 5 6; do
  for cell in "tp 1 get 16 2" "tp 1 set 16 2" "tp 1 add 8 2" "tp 16 set_nowait 16 2" "tp 16 get 16 2" "rdzv 64 3"; do
    if [ $((rep % 2)) = 1 ]; then run base $B $cell; run new $N $cell; else run new $N $cell; run base $B $cell; fi
  done
done
