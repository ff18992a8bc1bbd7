#!/bin/bash
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SIZES=${SIZES:-8,64,256,1024,4096,16384,65536}; R=${R:-4}
CASES=${CASES:-"4:pair 4:split 4:none 8:pair 8:split 8:none"}
BUILDS=${BUILDS:-"base new xp ompi"}
for r in $(seq $R); do for c in $CASES; do np=${c%%:*}; pl=${c#*:}
  if [ $pl = none ]; then pre=""; else pre=/tmp/s23/pin.sh; fi
  for b in $BUILDS; do
    e=""
    case $b in base) B=${BASE:-/tmp/base23};; new) B=build-o3;; xp) B=/tmp/xpbuild; e="XP_RUN=2000";;
      xpA) B=/tmp/xpbuild2; e="XP_RUN=2000 XP_MAX=256";; xpB) B=/tmp/xpbuild2; e="XP_RUN=2000";; esac
    echo -n "r$r np$np $pl $b "
    if [ $b = ompi ]; then
      PLACE=$pl mpirun.openmpi -x PLACE --oversubscribe --bind-to none -n $np $pre /tmp/s23/ext.ompi -c sendrecv -s $SIZES -t 0.05 -l x ompi 2>&1 | awk '$1=="sendrecv"{printf "%s %s  ",$2,$4}'
    else
      PLACE=$pl env $e $B/tools/cohortrun/cohortrun -n $np $pre $B/tools/cohort-perf/cohort-perf --coll sendrecv --sizes $SIZES --time 0.05 --in-place no 2>&1 | grep "^\[0\]" | sed "s/^\[0\] //" | grep -v "^#" | awk 'NF>5{printf "%s %s  ", $1,$6}'
    fi; echo
  done
done; done
