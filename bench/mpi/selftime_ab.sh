#!/usr/bin/env bash
# bench/mpi/selftime_ab.sh A_DIR B_DIR REPS OUT - an interleaved A/B of two
# selftime builds of libcohort-mpi (-DCOHORT_MPI_SELFTIME=ON, as selftime.sh
# builds one; A_DIR and B_DIR hold their libcohort-mpi-{openmpi,mpich}.so): per
# rep, per MPI and cell, one launch of each (ABBA order across reps), every
# rank's selftime line appended to OUT as
#   impl op size A|B rep rank R p10 N p50 N p90 N p99 N load L
# then the summary: per cell the medians over reps x ranks of p10/p50/p99 and
# the per-pair B-A of p50 (median [min, max]). `selftime_ab.sh --summarize OUT`
# prints the summary of an existing OUT again.
#   CELLS="allreduce:8 allreduce:4096 bcast:8 bcast:4096"  RANKS=2  SCALE=0.3
#   OMPI_EXTRA (default --bind-to core)  MPICH_EXTRA  IMPLS="openmpi mpich"
set -u
summarize() {
python3 - "$1" <<'PY'
import sys, collections, statistics as st
rows=collections.defaultdict(lambda: collections.defaultdict(dict))
for l in open(sys.argv[1]):
    f=l.split()
    impl,op,sz,ab,r,rank=f[0],f[1],int(f[2]),f[3],int(f[4]),int(f[6])
    v=dict(zip(f[7::2],map(float,f[8::2])))
    rows[(impl,op,sz)][(r,rank)][ab]=v
print("cell | A p10/p50/p99 | B p10/p50/p99 (medians over reps x ranks, ns) | B-A p50 per pair: median [min,max]")
for k in sorted(rows):
    pr=[x for x in rows[k].values() if 'A' in x and 'B' in x]
    m=lambda ab,q: st.median(x[ab][q] for x in pr)
    d=[x['B']['p50']-x['A']['p50'] for x in pr]
    print(f"{k[0]:8} {k[1]:9} {k[2]:>6} | {m('A','p10'):5.0f} {m('A','p50'):5.0f} {m('A','p99'):6.0f} | {m('B','p10'):5.0f} {m('B','p50'):5.0f} {m('B','p99'):6.0f} | {st.median(d):+5.0f} [{min(d):+.0f}, {max(d):+.0f}] n={len(pr)}")
PY
}
if [ "${1:-}" = --summarize ]; then summarize "${2:?--summarize OUT}"; exit 0; fi
A=${1:?A_DIR} B=${2:?B_DIR} reps=${3:?REPS} out=${4:?OUT} n=${RANKS:-2}
CELLS=${CELLS:-allreduce:8 allreduce:4096 bcast:8 bcast:4096}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/selftime-ab.XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
mpicc.openmpi -O2 -o "$tmp/bench-openmpi" "$root/bench/mpi/bench_mpi.c" || exit 2
mpicc.mpich -O2 -o "$tmp/bench-mpich" "$root/bench/mpi/bench_mpi.c" || exit 2
for ((r = 0; r < reps; r++)); do
  order="A B"; ((r % 2)) && order="B A"
  for impl in ${IMPLS:-openmpi mpich}; do for cell in $CELLS; do op=${cell%:*} sz=${cell#*:}
    for ab in $order; do d=$A; [ $ab = B ] && d=$B
      if [ $impl = openmpi ]; then o=$(mpirun.openmpi --allow-run-as-root -n $n ${OMPI_EXTRA:---bind-to core} -x LD_PRELOAD=$d/libcohort-mpi-openmpi.so "$tmp/bench-openmpi" ${SCALE:-0.3} $op $sz 2>&1)
      else o=$(mpiexec.mpich -n $n -bind-to core ${MPICH_EXTRA:-} -genv LD_PRELOAD $d/libcohort-mpi-mpich.so "$tmp/bench-mpich" ${SCALE:-0.3} $op $sz 2>&1); fi
      echo "$o" | grep 'selftime:' | sed -E "s/^cohort-mpi: rank ([0-9]+): selftime: .*p10 ([0-9]+) ns, p50 ([0-9]+) ns, p90 ([0-9]+) ns, p99 ([0-9]+) ns.*/$impl $op $sz $ab $r rank \1 p10 \2 p50 \3 p90 \4 p99 \5 load $(cut -d' ' -f1 /proc/loadavg)/" >> "$out"
    done; done; done
done
summarize "$out"
