#!/bin/bash
# place.sh SIZE SECS [env...]: cohort-perf tcp broadcast, 2 ranks forked; samples each rank's CPU (stat field 39) and state every 2 ms
P=/work/wt/tcpbc/build/tools/cohort-perf/cohort-perf
s=$1 t=$2; shift 2
env "$@" $P --np 2 --transport tcp --coll broadcast --sizes $s --time $t --in-place no > place.out 2>&1 &
sleep 0.5
pids=$(pgrep -P $! -f cohort-perf | head -2 | tr '\n' ' ')
[ -z "$pids" ] && pids=$(pgrep -f "cohort-perf --np 2 --transport tcp" | tr '\n' ' ')
same=0 diff=0 tot=0
end=$((SECONDS + t - 1))
while [ $SECONDS -lt $end ]; do
  set -- $pids; a=$(awk '{print $39 $3}' /proc/$1/stat 2>/dev/null); b=$(awk '{print $39 $3}' /proc/$2/stat 2>/dev/null)
  [ -z "$a" -o -z "$b" ] && break
  [ "${a:0:1}" = "${b:0:1}" ] && same=$((same+1)) || diff=$((diff+1)); sleep 0.002
done
wait
echo "pids $pids same-cpu $same diff-cpu $diff"; grep -E "^ +$s" place.out
