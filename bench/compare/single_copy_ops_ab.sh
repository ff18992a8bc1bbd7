#!/bin/bash
# bench/compare/single_copy_ops_ab.sh - two copies vs single copy for every op that has
# a single-copy path (broadcast, all_gather, gather, scatter, all_to_all), in one
# interleaved run at NP ranks: cohort with COHORT_SHM_SINGLE_COPY=off (two copies
# through the segment) and =on (process_vm_readv/writev for every block >= 4 KiB), Open
# MPI's vader with CMA (its default) and without, for the ops its harness has
# (bcast, allgather), and one memcpy of each size (the floor). Each round runs every
# variant once, the order rotating, so machine load hits all variants alike; the table
# gives medians over launches of the per-launch mean, p50 and p99 (cohort-perf), and
# single/two ratios per launch pair.
#
#   bench/compare/single_copy_ops_ab.sh [ROUNDS]        default 5
#   bench/compare/single_copy_ops_ab.sh --summarize DIR  the table again from a run's files
#   SIZES=65536,1048576,16777216  NP=2  T=0.1  OUT=DIR
# Sizes are nccl-tests' full buffers (all_gather/gather output, scatter/all_to_all input).
set -u
. "$(dirname "$0")/ab_common.sh"
PEER=${PEER_BENCH:-/work/shared/peers/coll/mpi_coll_bench.c}
SIZES=${SIZES:-65536,1048576,16777216}
NP=${NP:-2}
T=${T:-0.1}
OPS=broadcast,all_gather,gather,scatter,all_to_all
ab_args single-copy-ops "$@"
summarize() {
ab_python - "$OUT" <<'PY' | tee "$OUT/summary.md"
import statistics as st, sys
from ab_rows import launches, lines, perf_row, median as m, fmt, MPI_OPS as mpi
out = sys.argv[1]
cells = {}   # (variant, op, size) -> [(mean, p50, p99)]
paired = {}  # (op, size, round) -> {variant: mean}
for v, rnd, path in launches(out):
    for _, op, f in lines(path):
        pr = perf_row(op, f)
        if v in ("two", "single") and pr:
            size, row = pr[0], pr[1:]
        elif v in ("cma", "none") and len(f) >= 9 and f[0] in ("bcast", "allgather"):
            op, size, row = mpi[f[0]], int(f[1]), (float(f[3]), None, None)
        elif v == "memcpy" and len(f) >= 7 and f[0] == "memcpy":
            op, size, row = "memcpy", int(f[1]), (float(f[5]), float(f[2]), float(f[3]))
        else:
            continue
        cells.setdefault((v, op, size), []).append(row)
        paired.setdefault((op, size, rnd), {})[v] = row[0]
names = {"two": "cohort two copies (=off)", "single": "cohort single copy (=on)",
         "cma": "Open MPI vader CMA", "none": "Open MPI vader no single copy",
         "memcpy": "one memcpy"}
order = ["memcpy", "broadcast", "all_gather", "gather", "scatter", "all_to_all"]
print("| op | size | variant | launches | mean us median (min-max) | p50 us | p99 us |")
print("|---|---:|---|---:|---|---:|---:|")
for k in sorted(cells, key=lambda k: (k[2], order.index(k[1]), list(names).index(k[0]))):
    v, op, b = k
    xs = cells[k]
    print(f"| {op} | {b} | {names[v]} | {len(xs)} | {fmt(m([x[0] for x in xs]))} "
          f"({fmt(min(x[0] for x in xs))}-{fmt(max(x[0] for x in xs))}) | "
          f"{fmt(m([x[1] for x in xs]))} | {fmt(m([x[2] for x in xs]))} |")
print()
print("| op | size | single/two mean, per launch pair: median (min-max) | pairs |")
print("|---|---:|---|---:|")
ratios = {}
for (op, b, r), d in paired.items():
    if "two" in d and "single" in d and d["two"] > 0:
        ratios.setdefault((op, b), []).append(d["single"] / d["two"])
for (op, b) in sorted(ratios, key=lambda k: (k[1], order.index(k[0]))):
    xs = ratios[(op, b)]
    print(f"| {op} | {b} | x{st.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f}) | {len(xs)} |")
PY
}
[ -n "$SUMMARIZE_ONLY" ] && { summarize; exit 0; }
ab_tmp cohort-scops
have_mpi=1
mpicc.openmpi -O2 -o "$TMP/mcb" "$PEER" -lm 2>/dev/null || have_mpi=0
cc -O2 -o "$TMP/memcpy_floor" "$HERE/memcpy_floor.c" || exit 2
if [ $have_mpi = 1 ]; then
    ab_info "# $(vader_mechanism)" "# NP=$NP SIZES=$SIZES T=$T ROUNDS=$ROUNDS OPS=$OPS"
else
    ab_info "# NP=$NP SIZES=$SIZES T=$T ROUNDS=$ROUNDS OPS=$OPS"
fi
variant() {
    case $1 in
    two)    COHORT_SHM_SINGLE_COPY=off "$PERF" --np "$NP" --coll "$OPS" --sizes "$SIZES" --time "$T" --in-place no --percentiles ;;
    single) COHORT_SHM_SINGLE_COPY=on COHORT_SHM_SINGLE_COPY_BYTES=4096 "$PERF" --np "$NP" --coll "$OPS" --sizes "$SIZES" --time "$T" --in-place no --percentiles ;;
    cma)    mpirun.openmpi --oversubscribe -n "$NP" --mca btl_vader_single_copy_mechanism cma "$TMP/mcb" -c bcast,allgather -s "$SIZES" -t "$T" ;;
    none)   mpirun.openmpi --oversubscribe -n "$NP" --mca btl_vader_single_copy_mechanism none "$TMP/mcb" -c bcast,allgather -s "$SIZES" -t "$T" ;;
    memcpy) for s in ${SIZES//,/ }; do "$TMP/memcpy_floor" "$s" 500; done ;;
    esac
}
if [ $have_mpi = 1 ]; then ab_rounds two single memcpy cma none; else ab_rounds two single memcpy; fi
summarize
