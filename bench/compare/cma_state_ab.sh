#!/bin/bash
# bench/compare/cma_state_ab.sh - cohort's two copies vs its single copy vs Open MPI's
# CMA (vader), 2-rank broadcast, with what decides each launch recorded beside it: the
# c2c round trip before and after (c2c.c: the host's placement of the two vCPUs) and,
# for cohort, where each rank ran (--sched). Variants: cohort off/on (COHORT_SHM_SINGLE_COPY,
# =on from 4096 B) x bind none/core, and Open MPI (which binds 2 ranks to cores), each
# back to back (b2b) and OSU style (osu); every variant once a round, the order rotating.
# The table splits launches by c2c state (near: < 250 ns before and after; far: >= 250
# both; mixed) - docs/performance.md "Single copy vs Open MPI's CMA: placement and host state".
#
#   bench/compare/cma_state_ab.sh [ROUNDS]         default 5
#   bench/compare/cma_state_ab.sh --summarize DIR  the table again from a run's files
#   SIZES=4096,...  T=0.05  VARIANTS="off-none on-none off-core on-core ompi"  MODES="b2b osu"
set -u
. "$(dirname "$0")/ab_common.sh"
SIZES=${SIZES:-4096,65536,262144,1048576}
T=${T:-0.05}
VARIANTS=${VARIANTS:-off-none on-none off-core on-core ompi}
MODES=${MODES:-b2b osu}
ab_args cma-state "$@"
summarize() {
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import glob, os, re, statistics as st, sys
out = sys.argv[1]
cells = {}  # (mode, size, variant, state) -> [(p50, p99, avg)]
for path in sorted(glob.glob(os.path.join(out, "*.txt"))):
    name = os.path.basename(path)
    if name == "info.txt":
        continue
    v, rnd = name.split(".")[:2]
    var, mode = v.rsplit("-", 1)
    txt = open(path).read()
    c2c = [int(x) for x in re.findall(r"# c2c (?:before|after): c2c \S+ \S+ (\d+)", txt)]
    state = "?" if len(c2c) < 2 else ("near" if max(c2c) < 250 else "far" if min(c2c) >= 250 else "mixed")
    for line in txt.splitlines():
        f = line.split()
        if var == "ompi" and len(f) >= 4 and f[0] == "bcast":
            key, val = int(f[1]), (None, None, float(f[3]))
        elif var != "ompi" and len(f) >= 12 and f[0].isdigit():
            key, val = int(f[0]), (float(f[9]), float(f[10]), float(f[5]))
        else:
            continue
        for s in (state, "all"):
            cells.setdefault((mode, key, var, s), []).append(val)
vs = sorted({k[2] for k in cells}, key=lambda x: (x == "ompi", x))
def med(xs):
    xs = [x for x in xs if x is not None]
    return f"{st.median(xs):.1f}" if xs else "-"
for mode in ("b2b", "osu"):
    for s in ("all", "near", "far", "mixed"):
        keys = sorted({k[1] for k in cells if k[0] == mode and k[3] == s})
        if not keys:
            continue
        print(f"\n{mode}, launches in c2c state {s}: cohort p50 / p99 / mean us, Open MPI mean us (median over launches; n launches)\n")
        print("| size | " + " | ".join(vs) + " |")
        print("|---:|" + "---|" * len(vs))
        for z in keys:
            row = []
            for v in vs:
                xs = cells.get((mode, z, v, s), [])
                if not xs:
                    row.append("")
                elif v == "ompi":
                    row.append(f"{med([x[2] for x in xs])} (n={len(xs)})")
                else:
                    row.append(f"{med([x[0] for x in xs])} / {med([x[1] for x in xs])} / {med([x[2] for x in xs])} (n={len(xs)})")
            print(f"| {z} | " + " | ".join(row) + " |")
PY
}
[ -n "$SUMMARIZE_ONLY" ] && { summarize; exit 0; }
ab_tmp cma-state
cc -O2 -Wall -pthread -o "$TMP/c2c" "$HERE/c2c.c" || exit 2
mpicc.openmpi -O2 -o "$TMP/mpi_coll_bench" /work/shared/peers/coll/mpi_coll_bench.c -lm || exit 2
ab_info "# SIZES=$SIZES T=$T VARIANTS=$VARIANTS MODES=$MODES ROUNDS=$ROUNDS" \
    "# open mpi: $(mpirun.openmpi --version 2>&1 | head -1); $(vader_mechanism)"
variant() {
    local var=${1%-*} mode=${1##*-} osu=() o=() cp bind
    [ "$mode" = osu ] && osu=(--osu) && o=(-o)
    echo "# c2c before: $("$TMP/c2c" 2>/dev/null)"
    if [ "$var" = ompi ]; then
        mpirun.openmpi --report-bindings -n 2 "$TMP/mpi_coll_bench" -c bcast -s "$SIZES" -t "$T" "${o[@]}"
    else
        cp=${var%-*} bind=${var#*-}
        COHORT_SHM_SINGLE_COPY=$cp COHORT_SHM_SINGLE_COPY_BYTES=4096 "$PERF" --np 2 --bind "$bind" \
            --sched --coll broadcast --sizes "$SIZES" --time "$T" --in-place no --percentiles "${osu[@]}"
    fi
    echo "# c2c after: $("$TMP/c2c" 2>/dev/null)"
}
vs=()
for v in $VARIANTS; do for m in $MODES; do vs+=("$v-$m"); done; done
ab_rounds "${vs[@]}"
summarize
