#!/usr/bin/env bash
# bench/compare/wait_step_ab.sh [ROUNDS] - how long an oversubscribed
# shared-memory waiter yields before it sleeps on the root's futex, judged as
# bench/compare/check judges it: the per-iteration slowest rank's p50 / p99
# (step_*). Variants: def (COHORT_SHM_YIELD_US unset) and yN (N us),
# interleaved, the order rotating; cohort-perf --np NP broadcast for each NP,
# JSON per launch. NPS="4 8 16" SIZES=8,256,4096,16384 T=0.1 YIELDS="def 50 200".
# --summarize DIR: the table again. wait_ab.sh is the per-rank form;
# docs/performance.md, "Ranks outnumbering cores: the yield budget and the step p99".
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
ab_args wait_step "$@"
NPS=${NPS:-4 8 16} SIZES=${SIZES:-8,256,4096,16384} T=${T:-0.1} YIELDS=${YIELDS:-def 50 200}
variant() {
    local y=${1%%.*} np=${1#*.}
    local a=(--np "$np" --coll broadcast --sizes "$SIZES" --time "$T" --in-place no --percentiles
             -J "$OUT/$1.$r.json")
    if [ "$y" = ydef ]; then env -u COHORT_SHM_YIELD_US "$PERF" "${a[@]}"
    else COHORT_SHM_YIELD_US=${y#y} "$PERF" "${a[@]}"; fi
}
if [ -z "$SUMMARIZE_ONLY" ]; then
    ab_info "# wait_step_ab: NPS=$NPS SIZES=$SIZES T=$T YIELDS=$YIELDS ROUNDS=$ROUNDS"
    for np in $NPS; do
        vs=(); for y in $YIELDS; do vs+=("y$y.$np"); done
        ab_rounds "${vs[@]}"
    done
fi
python3 - "$OUT" <<'PY'
import glob, json, os, statistics as st, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "y*.json")):
    v, np, r = os.path.basename(f)[:-5].split(".")
    try:
        doc = json.load(open(f))
    except ValueError:
        continue
    for x in doc["results"]:
        rows.setdefault((int(np), x["size"], r), {})[v[1:]] = x
vs = sorted({v for p in rows.values() for v in p}, key=lambda v: (v != "def", v))
print("| ranks | bytes | " + " | ".join(f"{v}: step p50 / p99 (us), rounds p99 <= 10x p50" for v in vs)
      + " | " + " | ".join(f"p99 {v}/def per round (median)" for v in vs[1:]) + " |")
print("|---:|---:|" + "---|" * (2 * len(vs) - 1))
for np, b in sorted({(n, b) for n, b, _ in rows}):
    pr = [p for (n, bb, _), p in rows.items() if n == np and bb == b and len(p) == len(vs)]
    if not pr:
        continue
    cells = []
    for v in vs:
        m = lambda k: st.median(p[v][k] for p in pr)
        ok = sum(p[v]["step_p99_us"] <= 10 * p[v]["step_p50_us"] for p in pr)
        cells.append(f"{m('step_p50_us'):.2f} / {m('step_p99_us'):.2f}, {ok} of {len(pr)}")
    for v in vs[1:]:
        cells.append("x%.2f" % st.median(p[v]["step_p99_us"] / p["def"]["step_p99_us"] for p in pr))
    print(f"| {np} | {b} | " + " | ".join(cells) + " |")
PY
