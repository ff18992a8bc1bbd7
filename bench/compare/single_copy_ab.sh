#!/bin/bash
# bench/compare/single_copy_ab.sh - what single copy is worth on this machine, in one
# interleaved run: 2-rank broadcast with cohort's two copies (default) and single copy
# (COHORT_SHM_SINGLE_COPY=on), Open MPI with vader's CMA (its default) and without
# (btl_vader_single_copy_mechanism none), and one memcpy of 1 MiB (the floor). Each
# round runs every variant once, the order rotating; medians over rounds.
#
#   bench/compare/single_copy_ab.sh [ROUNDS]        default 5
#   bench/compare/single_copy_ab.sh --summarize DIR  the table again from a run's files
#   SIZES=65536,1048576,16777216  NP=2  T=0.2  OUT=DIR
set -u
. "$(dirname "$0")/ab_common.sh"
SIZES=${SIZES:-65536,1048576,16777216}
NP=${NP:-2}
T=${T:-0.2}
ab_args single-copy "$@"
summarize() {
ab_python - "$OUT" <<'PY' | tee "$OUT/summary.md"
import sys
from ab_rows import launches, lines, perf_row, median as m, fmt
out = sys.argv[1]
cells = {}
for v, _, path in launches(out):
    for _, op, f in lines(path):
        row = perf_row(op, f)
        if v in ("two", "single") and row and f[4] == "0":  # the root's column: 0
            cells.setdefault((v, row[0]), []).append(row[1:])
        elif v in ("cma", "none") and len(f) >= 9 and f[0] == "bcast":
            cells.setdefault((v, int(f[1])), []).append((float(f[3]), None, None))
        elif v == "memcpy" and len(f) >= 7 and f[0] == "memcpy":
            cells.setdefault((v, int(f[1])), []).append((float(f[5]), float(f[2]), float(f[3])))
names = {"two": "cohort, two copies (default)", "single": "cohort, single copy (COHORT_SHM_SINGLE_COPY=on)",
         "cma": "Open MPI, vader CMA (default)", "none": "Open MPI, vader no single copy",
         "memcpy": "one memcpy (memcpy_floor)"}
print("| variant | size | launches | mean us (median; min-max over launches) | p50 us | p99 us |")
print("|---|---:|---:|---|---:|---:|")
for (v, b) in sorted(cells, key=lambda k: (k[1], list(names).index(k[0]))):
    xs = cells[(v, b)]
    print(f"| {names[v]} | {b} | {len(xs)} | {fmt(m([x[0] for x in xs]))} ({fmt(min(x[0] for x in xs))}-"
          f"{fmt(max(x[0] for x in xs))}) | {fmt(m([x[1] for x in xs]))} | {fmt(m([x[2] for x in xs]))} |")
PY
}
[ -n "$SUMMARIZE_ONLY" ] && { summarize; exit 0; }
ab_tmp cohort-scab
mpicc.openmpi -O2 -o "$TMP/mcb" /work/shared/peers/coll/mpi_coll_bench.c -lm || exit 2
cc -O2 -o "$TMP/memcpy_floor" "$HERE/memcpy_floor.c" || exit 2
ab_info "# $(vader_mechanism)" "# NP=$NP SIZES=$SIZES T=$T ROUNDS=$ROUNDS"
variant() {
    case $1 in
    two)    "$PERF" --np "$NP" --coll broadcast --sizes "$SIZES" --time "$T" --in-place no --percentiles ;;
    single) COHORT_SHM_SINGLE_COPY=on "$PERF" --np "$NP" --coll broadcast --sizes "$SIZES" --time "$T" --in-place no --percentiles ;;
    cma)    mpirun.openmpi --oversubscribe -n "$NP" --mca btl_vader_single_copy_mechanism cma "$TMP/mcb" -c bcast -s "$SIZES" -t "$T" ;;
    none)   mpirun.openmpi --oversubscribe -n "$NP" --mca btl_vader_single_copy_mechanism none "$TMP/mcb" -c bcast -s "$SIZES" -t "$T" ;;
    memcpy) "$TMP/memcpy_floor" 1048576 2000 ;;
    esac
}
ab_rounds two single cma none memcpy
summarize
