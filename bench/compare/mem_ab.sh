#!/bin/bash
# bench/compare/mem_ab.sh - the one-copy broadcast from cohort_mem_alloc buffers
# (cohort-perf --mem shared) against the same binary's usual path (--mem private: what
# auto picks, two copies through the segment on the development VM) and against the
# floor, one memcpy of 1 MiB (memcpy_floor.c), issue #14's "2-rank broadcast of 1 MiB
# within 1.3x of one memcpy"; nosplit: --mem shared with COHORT_SHM_MEM=nosplit (readers do
# not offer their regions: one memcpy of the whole message each, the root writes nothing).
# Back to back (cohort-perf's default) and OSU style (--osu).
# Each round runs every variant once, the order rotating; the table gives per-round
# ratios of p50 and p99 (median, min-max over rounds).
#
#   bench/compare/mem_ab.sh [ROUNDS]        default 5
#   bench/compare/mem_ab.sh --summarize DIR  the table again from a run's files
#   SIZES=65536,...,4194304  NP=2  T=0.1  OUT=DIR
set -u
. "$(dirname "$0")/ab_common.sh"
SIZES=${SIZES:-65536,262144,1048576,4194304}
NP=${NP:-2}
T=${T:-0.1}
ab_args mem "$@"
summarize() {
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import glob, os, statistics as st, sys
out = sys.argv[1]
rows = {}   # (mode, size, round) -> {mem: (p50, p99)}
floor = {}  # round -> (p50, p99) of one memcpy of 1 MiB
for path in glob.glob(os.path.join(out, "*.txt")):
    v, rnd = os.path.basename(path).split(".")[:2]
    if v in ("info", "summary"):
        continue
    for line in open(path):
        f = line.split()
        if v == "memcpy":
            if f and f[0] == "memcpy":
                floor[rnd] = (float(f[2]), float(f[3]))
            continue
        mem, mode = v.split("-")  # mem: private, shared, nosplit
        if len(f) >= 12 and f[0].isdigit():
            rows.setdefault((mode, int(f[0]), rnd), {})[mem] = (float(f[9]), float(f[10]))
def q(xs):
    return f"{st.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
cells = {}
for (mode, size, rnd), d in rows.items():
    if "shared" in d and "private" in d:
        cells.setdefault((mode, size), []).append((d["private"], d["shared"], floor.get(rnd), d.get("nosplit")))
fl = list(floor.values())
if fl:
    print(f"memcpy of 1 MiB (the floor): p50 {st.median(x[0] for x in fl):.1f} us "
          f"({min(x[0] for x in fl):.1f}-{max(x[0] for x in fl):.1f}), p99 {st.median(x[1] for x in fl):.1f} us, {len(fl)} rounds\n")
ns = any(x[3] for xs in cells.values() for x in xs)
print("| mode | size | private p50 us | shared p50 us | shared/private p50 | private p99 | shared p99 | shared/private p99 | shared p50 / memcpy 1 MiB p50 |"
      + (" nosplit p50 us | shared/nosplit p50 | shared/nosplit p99 | nosplit p50 / memcpy 1 MiB p50 |" if ns else "") + " rounds |")
print("|---|---:|---:|---:|---|---:|---:|---|---|" + ("---:|---|---|---|" if ns else "") + "---:|")
for k in sorted(cells):
    xs = cells[k]
    fr = [x[1][0] / x[2][0] for x in xs if x[2] and k[1] == 1048576]
    print(f"| {k[0]} | {k[1]} | {st.median(x[0][0] for x in xs):.1f} | {st.median(x[1][0] for x in xs):.1f} | "
          f"x{q([x[1][0] / x[0][0] for x in xs])} | {st.median(x[0][1] for x in xs):.1f} | "
          f"{st.median(x[1][1] for x in xs):.1f} | x{q([x[1][1] / x[0][1] for x in xs])} | "
          f"{'x' + q(fr) if fr else ''} |", end="")
    if ns:
        ys = [x for x in xs if x[3]]
        fn = [x[3][0] / x[2][0] for x in ys if x[2] and k[1] == 1048576]
        print(f" {st.median(x[3][0] for x in ys):.1f} | x{q([x[1][0] / x[3][0] for x in ys])} | "
              f"x{q([x[1][1] / x[3][1] for x in ys])} | {'x' + q(fn) if fn else ''} |", end="")
    print(f" {len(xs)} |")
PY
}
[ -n "$SUMMARIZE_ONLY" ] && { summarize; exit 0; }
ab_tmp mem_ab
cc -O2 -Wall -o "$TMP/memcpy_floor" "$HERE/memcpy_floor.c" || exit 2
ab_info "# NP=$NP SIZES=$SIZES T=$T ROUNDS=$ROUNDS (LOADED: shared 2-core VM)"
variant() {
    if [ "$1" = memcpy ]; then
        "$TMP/memcpy_floor" 1048576 2000
        return
    fi
    local mem=${1%-*} mode=${1#*-} osu=() env=()
    [ "$mode" = osu ] && osu=(--osu)
    [ "$mem" = nosplit ] && mem=shared env=(COHORT_SHM_MEM=nosplit)
    env "${env[@]}" "$PERF" --np "$NP" --coll broadcast --sizes "$SIZES" --time "$T" --in-place no \
        --percentiles --mem "$mem" "${osu[@]}"
}
ab_rounds memcpy private-b2b shared-b2b nosplit-b2b private-osu shared-osu nosplit-osu
summarize
