#!/usr/bin/env bash
# bench/compare/wait_ab.sh [ROUNDS] - how long a shared-memory waiter yields
# before it sleeps on the futex when ranks outnumber cores: the default
# (COHORT_SHM_YIELD_US unset: 2 ms oversubscribed), 50 us, and 0 (sleep at
# once), interleaved, the order rotating; cohort-perf --np NP broadcast,
# per-rank p50/p99/max (--percentiles) and where each rank ran (--sched).
# NP=8 SIZES=8,256,4096,16384 T=0.1 YIELDS="def 50 0". --summarize DIR: the
# table again. docs/performance.md, "Ranks outnumbering cores: the p99".
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
ab_args wait "$@"
NP=${NP:-8} SIZES=${SIZES:-8,256,4096,16384} T=${T:-0.1} YIELDS=${YIELDS:-def 50 0}
variant() {
    local y=${1#y}
    if [ "$y" = def ]; then env -u COHORT_SHM_YIELD_US "$PERF" "${ARGS[@]}"
    else COHORT_SHM_YIELD_US=$y "$PERF" "${ARGS[@]}"; fi
}
ARGS=(--np "$NP" --coll broadcast --sizes "$SIZES" --time "$T" --in-place no --percentiles --sched)
if [ -z "$SUMMARIZE_ONLY" ]; then
    ab_info "# wait_ab: NP=$NP SIZES=$SIZES T=$T YIELDS=$YIELDS ROUNDS=$ROUNDS"
    vs=(); for y in $YIELDS; do vs+=("y$y"); done
    ab_rounds "${vs[@]}"
fi
# medians over the rounds: mean / p50 / p99 / max (us), per variant and size
python3 - "$OUT" <<'PY'
import glob, os, re, statistics as st, sys
d = {}
for f in glob.glob(os.path.join(sys.argv[1], "y*.*.txt")):
    v = os.path.basename(f).split(".")[0]
    for l in open(f):
        x = l.split()
        if x and x[0].isdigit() and len(x) >= 12:
            d.setdefault((v, int(x[0])), []).append([float(x[5])] + [float(y) for y in x[-3:]])
vs = sorted({v for v, _ in d}, key=lambda v: (v != "ydef", v))
print("| bytes | " + " | ".join(f"{v[1:]}: mean / p50 / p99 / max" for v in vs) + " |")
print("|---:|" + "---|" * len(vs))
for b in sorted({b for _, b in d}):
    cells = []
    for v in vs:
        r = d.get((v, b), [])
        cells.append(" / ".join(f"{st.median(c):.2f}" for c in zip(*r)) if r else "-")
    print(f"| {b} | " + " | ".join(cells) + " |")
PY
