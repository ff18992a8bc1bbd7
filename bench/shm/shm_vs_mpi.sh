#!/bin/sh
# shm_vs_mpi.sh - runs shm_micro and Open MPI's mpi_coll_bench (the peer
# harness from /work/shared/peers/coll, built with mpicc.openmpi)
# interleaved, same sizes and conventions, so both see the same machine.
#
# usage: bench/shm/shm_vs_mpi.sh BUILD_DIR MPI_BENCH OUT_DIR [reps] [ranks...]
#   env: COLLS (default allreduce), T (seconds per size, default 0.2),
#        SIZES (comma list; default 8 B..64 MiB x4), MPICH_BENCH (the same
#        harness built with mpicc.mpich: also run MPICH), BIND=1 (pin cohort's
#        ranks to CPUs, as Open MPI does by default for 2 ranks)
set -eu
B=$1; MPIB=$2; OUT=$3; REPS=${4:-3}; shift 4 2>/dev/null || shift $#
RANKS=${*:-2 4 8}
COLLS=${COLLS:-allreduce}
T=${T:-0.2}
SZ=${SIZES:+-s $SIZES}
mkdir -p "$OUT"
for r in $(seq 1 "$REPS"); do
  for n in $RANKS; do
    "$B/bench/shm/shm_micro" -n "$n" ${BIND:+-B} -c "$COLLS" -t "$T" $SZ > "$OUT/cohort_n${n}_r${r}.txt"
    mpirun.openmpi --allow-run-as-root --oversubscribe -n "$n" "$MPIB" -c "$COLLS" -t "$T" $SZ \
      > "$OUT/ompi_n${n}_r${r}.txt" 2>/dev/null
    if [ -n "${MPICH_BENCH:-}" ]; then
      mpirun.mpich -n "$n" "$MPICH_BENCH" -c "$COLLS" -t "$T" $SZ > "$OUT/mpich_n${n}_r${r}.txt" 2>/dev/null
    fi
  done
done
echo "results in $OUT"
