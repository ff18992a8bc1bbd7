#!/bin/bash
# ab.sh ROUNDS SIZES T "name1:ENV=.. ENV=.." "name2:..." ... ; per round each variant once, order rotated
R=$1; SIZES=$2; T=$3; shift 3
P=${PERF:-/work/wt/tcp1p/build/tools/cohort-perf/cohort-perf}
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg); sizes $SIZES T=$T; variants: $*"
vs=("$@"); nv=${#vs[@]}
for r in $(seq 1 $R); do
  for k in $(seq 0 $((nv-1))); do
    i=$(( (k + r) % nv )); spec=${vs[$i]}; name=${spec%%:*}; envs=${spec#*:}
    echo "## round $r $name"; echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
    EXTRA=$(for e in $envs; do case $e in A=*) echo "-a ${e#A=}";; esac; done)
    env $envs timeout 120 $P --np 2 --transport tcp --coll broadcast --sizes $SIZES --time $T --in-place no --percentiles $EXTRA 2>&1 | grep -E '^ +[0-9]+ '
  done
done
