#!/bin/bash
# Small shared-memory broadcasts, interleaved per launch: cohort with the slot
# rings (default: the tiny ring of 128 slots for <= 256 B, the ring of 8 for
# <= 16 KiB), Open MPI (mpi_coll_bench from /work/shared/peers/coll, or
# PEERS), cohort with COHORT_SHM_TINY_SLOTS=0 (the K=8 ring for every size
# <= 16 KiB, as before the tiny ring; TINY_AB="COHORT_SHM_TINY_SLOTS=256"
# compares another depth), cohort with COHORT_SHM_RING_SLOTS=0 (the
# synchronising path).
# Usage: bench/compare/ring_ab.sh [OUT_DIR]; REPS (5), NPS ("2 4 8"), SIZES.
# One line per size and launch: rep np lib load size mean_us p50 p99 max.
set -u
P=${P:-$(dirname "$0")/../../build/tools/cohort-perf/cohort-perf}
PEERS=${PEERS:-/work/shared/peers/coll}
REPS=${REPS:-5}
NPS=${NPS:-"2 4 8"}
S=${SIZES:-8,64,1024,4096,16384}
OUT=${1:-/tmp/ring_ab}
mkdir -p "$OUT/bin"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc.openmpi -O2 -o "$OUT/bin/mpi_coll_bench" "$PEERS/mpi_coll_bench.c" -lm || exit 2
out=$OUT/launches.txt
: > "$out"
cohort() { # lib np [env]
    local l; l=$(cut -d' ' -f1 /proc/loadavg)
    env $3 "$P" --np "$2" --coll broadcast --sizes "$S" --percentiles --in-place no --time 0.2 -c 0 \
        2>&1 | grep -E "^ +[0-9]" |
        awk -v p="rep=$rep np=$2 lib=$1 load=$l" '{print p, $1, $6, $(NF-2), $(NF-1), $NF}' >> "$out"
}
for rep in $(seq 1 "$REPS"); do
    for np in $NPS; do
        cohort ring "$np" ""
        l=$(cut -d' ' -f1 /proc/loadavg)
        mpirun.openmpi --oversubscribe -n "$np" "$OUT/bin/mpi_coll_bench" -c bcast -s "$S" -t 0.2 2>&1 |
            grep "^bcast" | awk -v p="rep=$rep np=$np lib=ompi load=$l" '{print p, $2, $4, "-", "-", "-"}' >> "$out"
        cohort ring8 "$np" "${TINY_AB:-COHORT_SHM_TINY_SLOTS=0}"
        cohort sync "$np" COHORT_SHM_RING_SLOTS=0
    done
done
python3 - "$out" <<'PY'
import collections, statistics as S, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split(); kv = dict(x.split('=') for x in f[:4])
    p = [None if x == '-' else float(x) for x in f[6:9]]
    d[(int(kv['np']), int(f[4]), kv['lib'])].append((float(f[5]), *p, float(kv['load'])))
print("np size | ring mean p50 p99 max | ring8 mean p50 p99 max | ompi mean | sync mean | ring/ompi ring/ring8 ring/sync | load")
for (np, size) in sorted({(k[0], k[1]) for k in d}):
    r, r8 = d[(np, size, 'ring')], d[(np, size, 'ring8')]
    o, s = d[(np, size, 'ompi')], d[(np, size, 'sync')]
    if not (r and r8 and o and s):
        continue
    m = lambda L, i: S.median(x[i] for x in L)
    A = r + r8 + o + s
    print(f"{np} {size:6d} | {m(r,0):8.2f} {m(r,1):5.2f} {m(r,2):7.1f} {m(r,3):8.0f} | "
          f"{m(r8,0):8.2f} {m(r8,1):5.2f} {m(r8,2):7.1f} {m(r8,3):8.0f} | {m(o,0):8.2f} | {m(s,0):8.2f} | "
          f"{m(r,0)/m(o,0):5.2f} {m(r,0)/m(r8,0):5.2f} {m(r,0)/m(s,0):5.2f} | "
          f"{min(x[4] for x in A):.0f}-{max(x[4] for x in A):.0f}")
PY
