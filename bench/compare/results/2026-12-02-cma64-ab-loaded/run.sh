#!/bin/bash
# Paired A/B, old (7d261f9) vs new (this branch) cohort-perf, auto copy path (no
# COHORT_SHM_SINGLE_COPY set), 2 ranks, broadcast, unbound (none: the default) and bound
# (core), b2b and osu, with Open MPI beside; c2c before/after; order rotating per round.
# LOADED machine. Usage: run.sh OLD_PERF NEW_PERF ROUNDS OUTDIR
OLD=$1 NEW=$2 R=$3 OUT=$4
SIZES=${SIZES:-4096,16384,65536,262144,1048576}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
HERE=$(cd "$(dirname "$0")/../.." && pwd)
cc -O2 -pthread -o /tmp/cma64/c2c "$HERE/c2c.c"
mpicc.openmpi -O2 -o /tmp/cma64/mcb /work/shared/peers/coll/mpi_coll_bench.c -lm
vs=(old-none new-none old-core new-core ompi)
for r in $(seq 1 $R); do
 for m in b2b osu; do
  for k in 0 1 2 3 4; do
   v=${vs[$(( (k + r) % 5 ))]}; f=$OUT/$v-$m.$r.txt
   osu=(); o=(); [ $m = osu ] && osu=(--osu) && o=(-o)
   { echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"; echo "# c2c before: $(/tmp/cma64/c2c)"
     case $v in
      ompi) mpirun.openmpi -n 2 /tmp/cma64/mcb -c bcast -s $SIZES -t 0.05 "${o[@]}";;
      *) P=$OLD; [ ${v%-*} = new ] && P=$NEW
         $P --np 2 --bind ${v#*-} --sched --coll broadcast --sizes $SIZES --time 0.05 --in-place no --percentiles "${osu[@]}";;
     esac
     echo "# c2c after: $(/tmp/cma64/c2c)"; echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"; } > $f 2>&1
  done
 done
done
