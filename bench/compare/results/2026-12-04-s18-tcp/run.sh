#!/usr/bin/env bash
# per-call distributions, 2 ranks over loopback TCP, 1 MiB broadcast and all_gather:
# Open MPI (ob1, btl tcp,self on lo, bound to a core each by mpirun) against cohort-perf
# (--transport tcp, default binding), ROUNDS rounds alternating; then cohort's
# COHORT_TCP_DUPLEX_SLICE 0/64K/128K/256K for all_gather and all_reduce 1-4 MiB.
set -u
OUT=${OUT:-$(dirname "$0")} ROUNDS=${ROUNDS:-3}
PERF=${COHORT_PERF:-build-o3/tools/cohort-perf/cohort-perf}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc.openmpi -O2 -o /tmp/bcast_pct "$(dirname "$0")/bcast_pct.c" || exit 2
row() { awk '/Collective/{op=$3} /^ +[0-9]/{print "cohort", op, $1, "mean", $6, "p50", $(NF-2), "p99", $(NF-1), "max", $NF}'; }
for r in $(seq 1 "$ROUNDS"); do
    for op in bcast allgather; do
        mpirun.openmpi -n 2 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
            /tmp/bcast_pct $op 1048576 2000 2>&1 | grep max-over | sed "s/^/round $r ompi /"
    done
    "$PERF" --np 2 --transport tcp --coll broadcast,all_gather --sizes 1048576 --iters 2000 \
        --in-place no --percentiles 2>&1 | row | sed "s/^/round $r /"
done > "$OUT/dist.txt"
for r in $(seq 1 "$ROUNDS"); do
    for ds in 0 65536 131072 262144; do
        COHORT_TCP_DUPLEX_SLICE=$ds "$PERF" --np 2 --transport tcp --coll all_gather,all_reduce \
            --sizes 1048576,4194304 --time 0.3 --in-place no --percentiles 2>&1 | row |
            sed "s/^/round $r slice $ds /"
    done
done > "$OUT/duplex.txt"
