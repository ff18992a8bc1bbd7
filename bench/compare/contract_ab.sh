#!/bin/bash
# bench/compare/contract_ab.sh - what the contract check costs: interleaved launches of
# cohort-perf (2 ranks, shm) with the check on and with COHORT_CONTRACT=off (--contract
# off), the order swapping every round (on off, off on, ...), each launch between two
# readings of the host's core-to-core round trip (c2c.c), --percentiles --sched.
#
#   bench/compare/contract_ab.sh [ROUNDS]          default 10 (pairs of launches)
#   bench/compare/contract_ab.sh --summarize DIR    the table again from a run's files
#   OPS=all_reduce,broadcast,all_gather,reduce_scatter  SIZES=8,65536,1048576  T=0.3
#   NP=2  OUT=DIR; the environment is passed on, so a path can be pinned
#   (COHORT_SHM_SINGLE_COPY=on ...: say so in the docs beside the figures)
#
# Summary per op and size: over the pairs (one on and one off launch of the same round)
# the median of on/off of the launches' p50 and of their p99, how many pairs went each
# way (on slower / on faster, by p50), the medians of p50 and p99 of each setting, and
# the pairs split by the host state (the larger of the pair's c2c readings: near
# < 200 ns, far >= 200 ns; a launch without a reading counts as near).
set -u
. "$(dirname "$0")/ab_common.sh"
OPS=${OPS:-all_reduce,broadcast,all_gather,reduce_scatter}
SIZES=${SIZES:-8,65536,1048576}
T=${T:-0.3}
NP=${NP:-2}
[ "${1:-}" = --summarize ] || set -- "${1:-10}"
ab_args contract-ab "$@"
summarize() {
ab_python - "$OUT" <<'PY' | tee "$OUT/summary.md"
import sys, statistics as S
from ab_rows import launches, perf_cells, fmt
out = sys.argv[1]
cell, c2c = perf_cells(out, ("on", "off")), {}
for v, r, path in launches(out):
    cs = [int(l.split()[6]) for l in open(path) if l.startswith("# c2c ") and len(l.split()) > 6
          and l.split()[6].isdigit()]
    c2c[(v, r)] = max(cs) if cs else None
def ratio_line(pairs):
    if not pairs:
        return "-", "-", "0/0"
    r50 = [a[0] / b[0] for a, b in pairs]; r99 = [a[1] / b[1] for a, b in pairs]
    return f"{S.median(r50):.3f}", f"{S.median(r99):.3f}", f"{sum(x > 1 for x in r50)}/{sum(x < 1 for x in r50)}"
print("| op | bytes | pairs | p50 on/off (median of pairs) | p99 on/off | pairs on slower/faster (p50) "
      "| p50 us on / off | p99 us on / off | near pairs: p50 on/off, slower/faster | far pairs: same |")
print("|---|---:|---:|---:|---:|---|---|---|---|---|")
for (op, b) in sorted(cell, key=lambda k: (k[0], k[1])):
    on, off = cell[(op, b)].get("on", {}), cell[(op, b)].get("off", {})
    rs = sorted(r for r in on if r in off)
    pairs = [(on[r], off[r]) for r in rs]
    if not pairs:
        continue
    st = {r: max((c2c.get((v, r)) or 0) for v in ("on", "off")) for r in rs}
    near = [(on[r], off[r]) for r in rs if st[r] < 200]
    far = [(on[r], off[r]) for r in rs if st[r] >= 200]
    r50, r99, way = ratio_line(pairs)
    n50, _, nway = ratio_line(near)
    f50, _, fway = ratio_line(far)
    med = lambda d, i: S.median([x[i] for x in d.values()])
    print(f"| {op} | {b} | {len(pairs)} | {r50} | {r99} | {way} | {fmt(med(on, 0))} / {fmt(med(off, 0))} "
          f"| {fmt(med(on, 1))} / {fmt(med(off, 1))} | {n50}, {nway} ({len(near)}) | {f50}, {fway} ({len(far)}) |")
c = [x for x in c2c.values() if x]
if c:
    print(f"\nc2c (ns, the larger of each launch's before/after): median {S.median(c)}, min {min(c)}, max {max(c)}; "
          f"launches at >= 200 ns: {sum(x >= 200 for x in c)} of {len(c)} with a reading "
          f"({len(c2c) - len(c)} without: c2c got no batch, its threads did not run together)")
PY
}
[ -n "$SUMMARIZE_ONLY" ] && { summarize; exit 0; }
ab_tmp cohort-contract-ab
cc -O2 -Wall -pthread -o "$TMP/c2c" "$HERE/c2c.c" || exit 2
ab_info "# NP=$NP OPS=$OPS SIZES=$SIZES T=$T ROUNDS=$ROUNDS" \
    "# env: $(env | grep '^COHORT_' | sort | tr '\n' ' ')"
variant() {
    echo "# c2c before: $("$TMP/c2c" || true)"
    "$PERF" --np "$NP" --coll "$OPS" --sizes "$SIZES" --time "$T" --in-place no --percentiles \
        --sched --contract "$1"
    echo "# c2c after: $("$TMP/c2c" || true)"
}
ab_rounds on off
summarize
