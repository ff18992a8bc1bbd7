#!/usr/bin/env bash
# bench/mpi/selftime.sh [reps] [scale] - the layer's own time per call,
# measured inside it: a profiling build of libcohort-mpi
# (-DCOHORT_MPI_SELFTIME=ON, in build-selftime/) timestamps each checked
# collective at entry, before PMPI, after PMPI and at exit (the TSC on
# x86-64) and prints, per rank at MPI_Finalize, the distribution of
# (entry -> PMPI) + (PMPI -> exit). Unlike run.sh's bare/layer difference
# this excludes the MPI library's own time, so scheduling noise on a loaded
# machine moves it much less (a preempted call lands in the tail, not the
# median). It does not see the indirect cost (cache lines the layer's
# records move between cores, slowing the MPI library's own polling), which
# only run.sh's A/B comparison shows. Cells: MPI_Allreduce and MPI_Bcast at
# 8 B, 4 KiB, 64 KiB, 1 MiB, 2 ranks (RANKS to change), Open MPI and MPICH;
# per cell the median over reps of rank 0's and rank 1's p50 and p99.
set -euo pipefail
reps=${1:-3} scale=${2:-0.2}
ranks=${RANKS:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
b=$root/build-selftime
cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOHORT_MPI_SELFTIME=ON -DCOHORT_FUZZ=OFF \
  -DCOHORT_TESTS=OFF -DCOHORT_TOOLS=OFF -DCOHORT_MANPAGES=OFF -DCOHORT_PYTHON_CHECK=OFF > /dev/null
cmake --build "$b" -j"$(nproc)" --target cohort-mpi-openmpi cohort-mpi-mpich > /dev/null
out=$root/bench/mpi/results/selftime-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
for impl in openmpi mpich; do
  bin=$out/bench_mpi_$impl
  if [ $impl = openmpi ]; then mpicc.openmpi -O2 -o "$bin" "$root/bench/mpi/bench_mpi.c"
  else mpicc.mpich -O2 -o "$bin" "$root/bench/mpi/bench_mpi.c"; fi
  lib=$b/mpi/libcohort-mpi-$impl.so
  for n in $ranks; do
    for ((r = 0; r < reps; r++)); do
      for op in allreduce bcast; do
        for size in 8 4096 65536 1048576; do
          if [ $impl = openmpi ]; then
            L=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -n $n -x LD_PRELOAD="$lib")
          else
            L=(mpiexec.mpich -n $n -genv LD_PRELOAD "$lib")
          fi
          "${L[@]}" "$bin" "$scale" $op $size 2>&1 >/dev/null | grep 'selftime:' |
            sed "s/^/$impl $n $op $size $r load $(cut -d' ' -f1 /proc/loadavg) /" >> "$out/raw.txt" ||
            { echo "$impl $n $op $size run $r: no selftime line (launch failed)" | tee -a "$out/failed.txt" >&2; }
        done
      done
    done
  done
done
python3 - "$out/raw.txt" <<'PY' | tee "$out/summary.txt"
import sys, re, statistics as st, collections
cells = collections.defaultdict(lambda: collections.defaultdict(list))
loads = []
for line in open(sys.argv[1]):
    f = line.split()
    impl, n, op, size, load = f[0], int(f[1]), f[2], int(f[3]), float(f[6])
    rank = int(re.search(r'rank (\d+):', line).group(1))
    q = dict(re.findall(r'(p\d+) (\d+) ns', line))
    loads.append(load)
    for k in ('p50', 'p99'):
        cells[(impl, n, op, size)][(rank, k)].append(int(q[k]))
print(f"load average (1 min) at the runs: min {min(loads):.1f}, median {st.median(loads):.1f}, max {max(loads):.1f}")
print(f"{'impl':8} {'n':>2} {'op':9} {'size':>8} | own time per call, ns (median over runs): rank 0 p50 / p99, rank 1 p50 / p99")
for (impl, n, op, size), v in sorted(cells.items()):
    m = lambda r, k: st.median(v[(r, k)]) if v[(r, k)] else float('nan')
    print(f"{impl:8} {n:>2} {op:9} {size:>8} | {m(0,'p50'):6.0f} / {m(0,'p99'):6.0f}   {m(1,'p50'):6.0f} / {m(1,'p99'):6.0f}")
PY
