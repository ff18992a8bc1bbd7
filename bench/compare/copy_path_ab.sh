#!/bin/bash
# bench/compare/copy_path_ab.sh - where single copy (process_vm_readv/writev) beats two
# copies through the segment, per size and per timing mode, on this machine: one binary,
# COHORT_SHM_SINGLE_COPY=off vs =on (COHORT_SHM_SINGLE_COPY_BYTES=4096 so every size
# takes it), back-to-back calls (cohort-perf's default) and OSU style (--osu: a barrier
# between iterations, so the root's source and the readers' destination are cold). Each
# round runs every variant once, the order rotating; the table gives per-launch-pair
# on/off ratios of p50 and p99 (median, min-max over rounds). BIND (cohort-perf --bind,
# default none) and --sched's line per row: unbound on a loaded 2-core machine the two
# ranks run on one cpu (ivcsw ~1 per call), where neither path overlaps anything and the
# single copy's two halves run one after the other - read it before the ratio (the x1.4-1.7
# of 2026-12-02 13:04 was that case; docs/performance.md "Single copy vs Open MPI's CMA").
#
#   bench/compare/copy_path_ab.sh [ROUNDS]        default 5
#   bench/compare/copy_path_ab.sh --summarize DIR  the table again from a run's files
#   SIZES=16384,...,4194304  OPS=broadcast,all_gather  NP=2  T=0.1  BIND=none  OUT=DIR
set -u
. "$(dirname "$0")/ab_common.sh"
SIZES=${SIZES:-16384,32768,65536,131072,262144,524288,1048576,4194304}
OPS=${OPS:-broadcast,all_gather}
NP=${NP:-2}
T=${T:-0.1}
BIND=${BIND:-none}
ab_args copy-path "$@"
summarize() {
ab_python - "$OUT" <<'PY' | tee "$OUT/summary.md"
import statistics as st, sys
from ab_rows import launches, lines, perf_row
out = sys.argv[1]
rows = {}  # (mode, op, size, round) -> {path: (p50, p99)}
for v, rnd, path in launches(out):
    p, mode = v.split("-")
    for _, op, f in lines(path):
        row = perf_row(op, f)
        if row:
            rows.setdefault((mode, op, row[0], rnd), {})[p] = row[2:]
cells = {}
for (mode, op, size, rnd), d in rows.items():
    if "on" in d and "off" in d:
        c = cells.setdefault((mode, op, size), [])
        c.append((d["off"], d["on"]))
def q(xs):
    return f"{st.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
print("| mode | op | size | off p50 us | on p50 us | on/off p50: median (min-max) | off p99 | on p99 | on/off p99 | pairs |")
print("|---|---|---:|---:|---:|---|---:|---:|---|---:|")
for k in sorted(cells, key=lambda k: (k[0], k[1], k[2])):
    xs = cells[k]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {st.median(x[0][0] for x in xs):.1f} | {st.median(x[1][0] for x in xs):.1f} | "
          f"x{q([x[1][0] / x[0][0] for x in xs])} | {st.median(x[0][1] for x in xs):.1f} | "
          f"{st.median(x[1][1] for x in xs):.1f} | x{q([x[1][1] / x[0][1] for x in xs])} | {len(xs)} |")
PY
}
[ -n "$SUMMARIZE_ONLY" ] && { summarize; exit 0; }
ab_info "# NP=$NP SIZES=$SIZES OPS=$OPS T=$T BIND=$BIND ROUNDS=$ROUNDS (LOADED: shared 2-core VM)"
variant() {
    local p=${1%-*} mode=${1#*-} osu=()
    [ "$mode" = osu ] && osu=(--osu)
    COHORT_SHM_SINGLE_COPY=$p COHORT_SHM_SINGLE_COPY_BYTES=4096 "$PERF" --np "$NP" --bind "$BIND" --sched \
        --coll "$OPS" --sizes "$SIZES" --time "$T" --in-place no --percentiles "${osu[@]}"
}
ab_rounds off-b2b on-b2b off-osu on-osu
summarize
