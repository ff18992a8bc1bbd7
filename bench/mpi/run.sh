#!/usr/bin/env bash
# bench/mpi/run.sh [pairs] [scale] - interleaved A/B benchmark of
# libcohort-mpi: MPI_Allreduce and MPI_Bcast at 8 B, 4 KiB, 64 KiB, 1 MiB on
# 2 and 4 ranks, Open MPI and MPICH, bare (A) and under the layer (B),
# alternating A and B runs `pairs` times. Prints per cell the median over
# pairs of p50, and of the per-pair B-A p50 difference, p99 and max, and
# writes the raw lines to bench/mpi/results/<date>/. Needs a build (build/).
# Not part of the test command: minutes, and numbers need a quiet machine.
# A pair runs A then B, the next B then A (a drift of the machine's load
# during a pair falls on both sides alike). IMPLS and RANKS select the
# cells (default: openmpi mpich, 2 4); the load average is recorded per run.
# A_LIBDIR=<dir>: A runs under <dir>/libcohort-mpi-<impl>.so instead of
# bare (another build of the layer: a before/after comparison, e.g.
# A_LIBDIR=/tmp/base/build/mpi for main's build).
set -euo pipefail
pairs=${1:-5} scale=${2:-1}
impls=${IMPLS:-openmpi mpich} ranks=${RANKS:-2 4}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/bench/mpi/results/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
for impl in $impls; do
  lib=$root/build/mpi/libcohort-mpi-$impl.so
  [ -e "$lib" ] || { echo "no $lib: build first"; continue; }
  bin=$out/bench_mpi_$impl
  if [ $impl = openmpi ]; then mpicc.openmpi -O2 -o "$bin" "$root/bench/mpi/bench_mpi.c"
  else mpicc.mpich -O2 -o "$bin" "$root/bench/mpi/bench_mpi.c"; fi
  for n in $ranks; do
    for ((p = 0; p < pairs; p++)); do
      order="A B"; ((p % 2)) && order="B A"
      for ab in $order; do
        if [ $impl = openmpi ]; then
          L=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -n $n)
          [ $ab = B ] && L+=(-x LD_PRELOAD="$lib")
          [ $ab = A ] && [ -n "${A_LIBDIR:-}" ] && L+=(-x LD_PRELOAD="$A_LIBDIR/libcohort-mpi-$impl.so")
        else
          L=(mpiexec.mpich -n $n)
          [ $ab = B ] && L+=(-genv LD_PRELOAD "$lib")
          [ $ab = A ] && [ -n "${A_LIBDIR:-}" ] && L+=(-genv LD_PRELOAD "$A_LIBDIR/libcohort-mpi-$impl.so")
        fi
        echo "$impl $n $ab $p load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/load.txt"
        "${L[@]}" "$bin" "$scale" | sed "s/^/$impl $n $ab $p /" >> "$out/raw.txt"
      done
    done
  done
done
python3 - "$out/raw.txt" <<'PY' | tee "$out/summary.txt"
import sys, statistics as st, collections
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = line.split()
    impl, n, ab, p, op, size = f[0], int(f[1]), f[2], int(f[3]), f[4], int(f[5])
    v = dict(zip(f[6::2], map(float, f[7::2])))
    rows[(impl, n, op, size)].setdefault(p, {})[ab] = v
loads = [float(l.split()[-1]) for l in open(sys.argv[1].replace('raw.txt', 'load.txt'))]
print(f"load average (1 min) during the runs: min {min(loads):.1f}, median {st.median(loads):.1f}, max {max(loads):.1f}")
print(f"{'impl':8} {'n':>2} {'op':9} {'size':>8} | {'p50 A':>8} {'p50 B':>8} {'B-A p50':>8} {'[q1, q3]':>17} {'B/A':>6} | {'p99 A':>8} {'p99 B':>8} | {'max A':>8} {'max B':>8}  (us, median over pairs; B-A: median and quartiles of the per-pair differences)")
for (impl, n, op, size), ps in sorted(rows.items()):
    pr = [v for v in ps.values() if 'A' in v and 'B' in v]
    m = lambda k, ab: st.median(x[ab][k] for x in pr)
    ds = sorted(x['B']['p50'] - x['A']['p50'] for x in pr)
    d = st.median(ds)
    q1, q3 = ds[len(ds) // 4], ds[(3 * len(ds)) // 4 if len(ds) > 1 else 0]
    r = st.median(x['B']['p50'] / x['A']['p50'] for x in pr)
    print(f"{impl:8} {n:>2} {op:9} {size:>8} | {m('p50','A'):8.3f} {m('p50','B'):8.3f} {d:+8.3f} [{q1:+7.3f}, {q3:+7.3f}] {r:6.3f} | {m('p99','A'):8.2f} {m('p99','B'):8.2f} | {m('max','A'):8.1f} {m('max','B'):8.1f}")
PY
