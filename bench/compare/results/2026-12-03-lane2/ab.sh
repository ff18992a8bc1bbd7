#!/bin/bash
# LOADED paired A/B of main (A) vs branch lane2 (B), 2 ranks, shm, 8 and 64 B,
# interleaved A B / B A (version_ab.sh), the algorithm and the small all_reduce's path pinned.
# Usage: ab.sh A_PERF B_PERF OUTDIR [PERF_ARGS]
set -u
A=$1 B=$2 O=$3; mkdir -p "$O"
export COHORT_ALGO_BROADCAST=shm COHORT_ALGO_SCATTER=shm COHORT_ALGO_GATHER=shm \
       COHORT_ALGO_REDUCE=shm COHORT_ALGO_ALL_REDUCE=shm COHORT_SHM_AR_INLINE=1
C2C=${C2C:-/tmp/lane2_c2c}
{ date -u +"start %H:%M:%S UTC"; cat /proc/loadavg; $C2C; } > "$O/host.txt"
N=${N:-10} OUT=$O/raw TRANSPORTS=shm OPS=${OPS:-broadcast,scatter,gather,reduce,all_reduce} SIZES=${SIZES:-8,64} \
  TIME=${TIME:-0.3} PERF_ARGS="${4:-}" "$(dirname "$0")/../../version_ab.sh" "$A" "$B" > "$O/summary.txt" 2>&1
{ date -u +"end %H:%M:%S UTC"; cat /proc/loadavg; $C2C; } >> "$O/host.txt"
