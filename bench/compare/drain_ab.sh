#!/usr/bin/env bash
# bench/compare/drain_ab.sh [ROUNDS] - a ring root that must wait for a slot:
# for that slot only (COHORT_SHM_RING_DRAIN=0, the default) or until the ring
# drained (=1), interleaved, the order rotating; cohort-perf --np NP broadcast
# for each NP, JSON per launch. Table: medians over the rounds of the
# per-iteration slowest rank's p50 / p99 (step_*: what bench/compare/check
# judges), how many rounds met p99 <= 10x p50, and the per-round p99 ratio.
# NPS="4 8 16" SIZES=8,256,4096,16384 T=0.1. --summarize DIR: the table again.
# docs/performance.md, "Ranks outnumbering cores: where the waits are".
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
ab_args drain "$@"
NPS=${NPS:-4 8 16} SIZES=${SIZES:-8,256,4096,16384} T=${T:-0.1}
variant() {
    local d=${1%%.*} np=${1#*.}
    COHORT_SHM_RING_DRAIN=${d#d} "$PERF" --np "$np" --coll broadcast --sizes "$SIZES" \
        --time "$T" --in-place no --percentiles -J "$OUT/$1.$r.json"
}
if [ -z "$SUMMARIZE_ONLY" ]; then
    ab_info "# drain_ab: NPS=$NPS SIZES=$SIZES T=$T ROUNDS=$ROUNDS"
    for np in $NPS; do ab_rounds "d0.$np" "d1.$np"; done
fi
python3 - "$OUT" <<'PY'
import glob, json, os, statistics as st, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "d*.json")):
    d, np, r = os.path.basename(f)[:-5].split(".")
    try:
        doc = json.load(open(f))
    except ValueError:
        continue
    for x in doc["results"]:
        rows.setdefault((int(np), x["size"], r), {})[d] = x
print("| ranks | bytes | drain off: step p50 / p99 (us) | drain on | rounds p99 <= 10x p50 off / on | p99 on/off per round (median) |")
print("|---:|---:|---|---|---|---:|")
for np, b in sorted({(n, b) for n, b, _ in rows}):
    pr = [v for (n, bb, _), v in rows.items() if n == np and bb == b and len(v) == 2]
    if not pr:
        continue
    m = lambda d, k: st.median(p[d][k] for p in pr)
    ok = lambda d: sum(p[d]["step_p99_us"] <= 10 * p[d]["step_p50_us"] for p in pr)
    ratio = st.median(p["d1"]["step_p99_us"] / p["d0"]["step_p99_us"] for p in pr)
    print(f"| {np} | {b} | {m('d0','step_p50_us'):.2f} / {m('d0','step_p99_us'):.2f} | "
          f"{m('d1','step_p50_us'):.2f} / {m('d1','step_p99_us'):.2f} | {ok('d0')} / {ok('d1')} of {len(pr)} | x{ratio:.2f} |")
PY
