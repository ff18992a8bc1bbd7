#!/bin/bash
# bench/compare/probe_dist.sh - the distribution of shm attach's speed probe: what
# copy_info reports (process_vm_readv vs memcpy at 64 KiB and 256 KiB, and what
# measuring took) over many launches of cohort-perf, one or more builds interleaved
# launch by launch, and bench/compare/probe_rounds.c's readings beside them.
#
#   NP="2 3 4" N=100 OUT=dir bench/compare/probe_dist.sh [NAME=PERF ...]
# Default: one build, COHORT_PERF, named "cur". Writes OUT/NP<n>.txt (lines "NAME
# RATIO64K RATIO256K TOOK_US"), OUT/rounds-sync.txt and OUT/rounds-b2b.txt
# (probe_rounds, 7 readings, with and without a barrier between them; N lines each),
# and OUT/summary.md: per build and NP the launches above 3.2 at 64 KiB (the
# threshold shm_cma.c's A2A_CHEAP_WORDS names), min/p10/p50/p90/max and what
# measuring took.
set -u
. "$(dirname "$0")/ab_common.sh"
NP=${NP:-"2 3 4"}
N=${N:-100}
OUT=${OUT:?OUT=dir}
mkdir -p "$OUT"
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=("cur=${COHORT_PERF:?COHORT_PERF or NAME=PERF arguments}")
lines=()
for b in "${builds[@]}"; do lines+=("# build ${b%%=*}: ${b#*=}"); done
ab_info "${lines[@]}" "# NP=$NP N=$N"
for np in $NP; do
    : > "$OUT/NP$np.txt"
    for i in $(seq "$N"); do
        for b in "${builds[@]}"; do
            line=$("${b#*=}" --np "$np" --coll broadcast --sizes 8 -n 5 --prewarm 0 2>&1 |
                grep -o "process_vm_readv vs memcpy[^)]*)" | head -1 |
                sed -E 's/.* x([0-9.]+), [0-9]+ KiB .* x([0-9.]+) .*took ([0-9]+) us.*/\1 \2 \3/')
            echo "${b%%=*} ${line:-unmeasured}" >> "$OUT/NP$np.txt"
        done
    done
done
ab_tmp probe-dist
tmp=$TMP
cc -O2 -Wall -Wextra -o "$tmp/probe_rounds" "$HERE/probe_rounds.c"
: > "$OUT/rounds-sync.txt"
: > "$OUT/rounds-b2b.txt"
for i in $(seq "$N"); do
    "$tmp/probe_rounds" 7 1 >> "$OUT/rounds-sync.txt"
    "$tmp/probe_rounds" 7 0 >> "$OUT/rounds-b2b.txt"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/info.txt"
python3 - "$OUT" $NP <<'PY' > "$OUT/summary.md"
import statistics as st, sys
out, nps = sys.argv[1], sys.argv[2:]
def q(v, p): return v[min(len(v) - 1, int(p * len(v)))]
print("| NP | build | launches | 64 KiB > 3.2 | min / p10 / p50 / p90 / max (64 KiB) | p50 256 KiB | took p50 / max (us) |")
print("|---|---|---|---|---|---|---|")
for np in nps:
    rows = [l.split() for l in open(f"{out}/NP{np}.txt")]
    for b in dict.fromkeys(r[0] for r in rows):
        r = [x for x in rows if x[0] == b and len(x) == 4]
        miss = sum(1 for x in rows if x[0] == b and len(x) != 4)
        if not r:
            print(f"| {np} | {b} | 0 (unmeasured {miss}) | | | | |"); continue
        s = sorted(float(x[1]) for x in r); l = sorted(float(x[2]) for x in r); t = [float(x[3]) for x in r]
        print(f"| {np} | {b} | {len(r)}{f' (+{miss} unmeasured)' if miss else ''} | {sum(v > 3.2 for v in s)} | "
              f"{s[0]:.2f} / {q(s,.1):.2f} / {st.median(s):.2f} / {q(s,.9):.2f} / {s[-1]:.2f} | {st.median(l):.2f} | "
              f"{st.median(t):.0f} / {max(t):.0f} |")
print()
print("probe_rounds.c, 7 readings a launch (64 KiB, two processes):")
print()
print("| barrier between | launches | reading 1 > 3.2 | reading 2 > 3.2 | median of 1-3 > 3.2 | p50 reading 1 | p50 readings 2-7 | p50 median of 1-3 |")
print("|---|---|---|---|---|---|---|---|")
for name, f in (("yes", "rounds-sync"), ("no", "rounds-b2b")):
    rows = [list(map(float, l.split())) for l in open(f"{out}/{f}.txt") if l.strip()]
    rest = [x for r in rows for x in r[1:]]
    print(f"| {name} | {len(rows)} | {sum(r[0] > 3.2 for r in rows)} | {sum(r[1] > 3.2 for r in rows)} | "
          f"{sum(st.median(r[:3]) > 3.2 for r in rows)} | {st.median(r[0] for r in rows):.2f} | {st.median(rest):.2f} | "
          f"{st.median(st.median(r[:3]) for r in rows):.2f} |")
PY
cat "$OUT/summary.md"
