#!/bin/bash
# ab.sh ROUNDS SIZES T NP "name:ENV=.. ENV=.." ... : per round every variant once in back-to-back
# mode and once with --osu, the variant order rotated each round (A B, B A, ...).
# LIB=dir in a variant's env picks its libcohort.so.0 (LD_LIBRARY_PATH); A=k adds -a k.
R=$1; SIZES=$2; T=$3; NP=$4; shift 4
P=${PERF:-/tmp/tcplarge-bin/cohort-perf}
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg); np $NP sizes $SIZES T=$T; variants: $*"
vs=("$@"); nv=${#vs[@]}
for r in $(seq 1 $R); do
  for mode in b2b osu; do
    for k in $(seq 0 $((nv-1))); do
      i=$(( (k + r) % nv )); spec=${vs[$i]}; name=${spec%%:*}; envs=${spec#*:}
      echo "## round $r $mode $name"; echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) c2c $(/tmp/tcplarge-bin/c2c 2>/dev/null | awk '$4 ~ /^[0-9]+$/ {print $4}') ns"
      EXTRA=$(for e in $envs; do case $e in A=*) echo "-a ${e#A=}";; LIB=*) ;; esac; done)
      LIBD=$(for e in $envs; do case $e in LIB=*) echo "${e#LIB=}";; esac; done)
      OSU=; [ $mode = osu ] && OSU=--osu
      env LD_LIBRARY_PATH=$LIBD $envs timeout 120 $P --np $NP --transport tcp --coll broadcast \
        --sizes $SIZES --time $T --in-place no --percentiles $OSU $EXTRA 2>&1 | grep -E '^ +[0-9]+ |rror'
    done
  done
done
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
