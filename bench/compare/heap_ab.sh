#!/bin/bash
# bench/compare/heap_ab.sh - a 2-rank broadcast whose buffers the program
# allocated itself (cohort-perf --mem private: aligned_alloc), as it is (plain: the
# usual path, the kernel's copy or two copies) and with libcohort-heap.so preloaded
# (heap: the same program, its allocations of COHORT_HEAP_MIN_BYTES and more shared,
# so the one-copy path), against buffers from cohort_mem_alloc (shared: --mem shared)
# and the floor, one memcpy of 1 MiB (memcpy_floor.c): issue #14's "2-rank broadcast
# of 1 MiB within 1.3x of one memcpy" for unchanged programs. Back to back and OSU
# style (--osu). The single-copy choice is pinned (COHORT_SHM_SINGLE_COPY=on: the
# kernel's copy for plain, and the probe's permission the one-copy path needs).
# Each round runs every variant once, the order rotating, with the host state (c2c
# round trip, ns) before each launch; the table gives per-round ratios of p50 and p99
# (median, min-max over rounds) and how many rounds went which way.
#
#   bench/compare/heap_ab.sh [ROUNDS]        default 5
#   bench/compare/heap_ab.sh --summarize DIR  the table again from a run's files
#   SIZES=262144,1048576,4194304  NP=2  T=0.1  OUT=DIR
set -u
. "$(dirname "$0")/ab_common.sh"
. "$(dirname "$0")/hoststate.sh"
SIZES=${SIZES:-262144,1048576,4194304}
NP=${NP:-2}
T=${T:-0.1}
HEAP=${COHORT_HEAP_LIB:-$ROOT/build/libcohort-heap.so}
ab_args heap "$@"
summarize() {
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import glob, os, statistics as st, sys
out = sys.argv[1]
rows = {}   # (mode, size, round) -> {variant: (p50, p99)}
floor = {}  # round -> (p50, p99) of one memcpy of 1 MiB
c2c = []
for path in glob.glob(os.path.join(out, "*.txt")):
    v, rnd = os.path.basename(path).split(".")[:2]
    if v in ("info", "summary"):
        continue
    for line in open(path):
        f = line.split()
        if line.startswith("# c2c before:") and f[3] != "-":
            c2c.append(int(f[3]))
        if v == "memcpy":
            if f and f[0] == "memcpy":
                floor[rnd] = (float(f[2]), float(f[3]))
            continue
        var, mode = v.split("-")  # var: plain, heap, shared
        if len(f) >= 12 and f[0].isdigit():
            rows.setdefault((mode, int(f[0]), rnd), {})[var] = (float(f[9]), float(f[10]))
def q(xs):
    return f"{st.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
fl = list(floor.values())
if fl:
    print(f"memcpy of 1 MiB (the floor): p50 {st.median(x[0] for x in fl):.1f} us "
          f"({min(x[0] for x in fl):.1f}-{max(x[0] for x in fl):.1f}), p99 {st.median(x[1] for x in fl):.1f} us, {len(fl)} rounds")
if c2c:
    print(f"host state (c2c round trip before each launch): median {st.median(c2c)} ns, {min(c2c)}-{max(c2c)}, {len(c2c)} probes")
print()
print("| mode | size | plain p50 us | heap p50 us | shared p50 us | heap/plain p50 | heap/plain p99 | rounds heap faster (p50) | heap/shared p50 | plain p99 | heap p99 | shared p99 | heap p50 / memcpy 1 MiB | plain p50 / memcpy 1 MiB | shared p50 / memcpy 1 MiB | rounds |")
print("|---|---:|---:|---:|---:|---|---|---|---|---:|---:|---:|---|---|---|---:|")
cells = {}
for (mode, size, rnd), d in rows.items():
    if all(k in d for k in ("plain", "heap", "shared")):
        cells.setdefault((mode, size), []).append((d["plain"], d["heap"], d["shared"], floor.get(rnd)))
for k in sorted(cells):
    xs = cells[k]
    one = k[1] == 1048576
    fr = lambda i: "x" + q([x[i][0] / x[3][0] for x in xs if x[3]]) if one else ""
    faster = sum(x[1][0] < x[0][0] for x in xs)
    print(f"| {k[0]} | {k[1]} | {st.median(x[0][0] for x in xs):.1f} | {st.median(x[1][0] for x in xs):.1f} | "
          f"{st.median(x[2][0] for x in xs):.1f} | x{q([x[1][0] / x[0][0] for x in xs])} | "
          f"x{q([x[1][1] / x[0][1] for x in xs])} | {faster} of {len(xs)} | x{q([x[1][0] / x[2][0] for x in xs])} | "
          f"{st.median(x[0][1] for x in xs):.1f} | {st.median(x[1][1] for x in xs):.1f} | {st.median(x[2][1] for x in xs):.1f} | "
          f"{fr(1)} | {fr(0)} | {fr(2)} | {len(xs)} |")
PY
}
[ -n "$SUMMARIZE_ONLY" ] && { summarize; exit 0; }
[ -r "$HEAP" ] || { echo "heap_ab.sh: no $HEAP (build libcohort-heap.so)" >&2; exit 2; }
ab_tmp heap_ab
cc -O2 -Wall -o "$TMP/memcpy_floor" "$HERE/memcpy_floor.c" || exit 2
hoststate_build "$TMP" || exit 2
ab_info "# NP=$NP SIZES=$SIZES T=$T ROUNDS=$ROUNDS HEAP=$HEAP (LOADED: shared 2-core VM)" \
    "# pinned: COHORT_SHM_SINGLE_COPY=on COHORT_TRANSPORT=shm; heap: LD_PRELOAD=libcohort-heap.so, COHORT_HEAP_MIN_BYTES default (1 MiB)"
variant() {
    echo "# c2c before: $(xcore)"
    if [ "$1" = memcpy ]; then
        "$TMP/memcpy_floor" 1048576 2000
        return
    fi
    local var=${1%-*} mode=${1#*-} osu=() pre="" mem=private
    [ "$mode" = osu ] && osu=(--osu)
    [ "$var" = heap ] && pre=$HEAP
    [ "$var" = shared ] && mem=shared
    env LD_PRELOAD="$pre" COHORT_SHM_SINGLE_COPY=on COHORT_TRANSPORT=shm "$PERF" --np "$NP" \
        --coll broadcast --sizes "$SIZES" --time "$T" --in-place no --percentiles --mem "$mem" "${osu[@]}"
}
ab_rounds memcpy plain-b2b heap-b2b shared-b2b plain-osu heap-osu shared-osu
summarize
