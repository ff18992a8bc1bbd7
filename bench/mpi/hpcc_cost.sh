#!/usr/bin/env bash
# bench/mpi/hpcc_cost.sh <openmpi|mpich> <libcohort-mpi-*.so> <hpcc> [pairs] [workdir]
#
# The layer's slowdown on a real program: `pairs` interleaved bare/layer
# runs of HPC Challenge (N=400, order alternating per pair) on 2 and 4
# ranks (RANKS to change), each launch's wall time and hpcc's own results
# (HPL, PTRANS, RandomAccess, FFT, DGEMM, ping-pong and ring latency)
# written to <workdir>/hpcc-<impl>-times.txt; prints per size the median
# over pairs of each figure, bare -> layer, and the median of the per-pair
# ratios (wall time: layer/bare; hpcc's rates: bare/layer, so > 1 is a
# slowdown either way). Exits non-zero if a run failed or the layer
# reported something. A_LIB=<.so>: the "bare" side runs under that build of
# the layer instead (before/after: "bare" is then the before). Debian's hpcc is built for Open MPI; for MPICH,
# scripts/hpcc-mpich.sh builds it and calls this.
set -uo pipefail
impl=${1:?openmpi|mpich} lib=${2:?libcohort-mpi .so} hpcc=${3:?hpcc binary}
pairs=${4:-3}
work=${5:-/tmp/cohort-mpi-suites}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/mpi/launch.sh"
mkdir -p "$work"
inf=/usr/share/doc/hpcc/examples/_hpccinf.txt
[ -r "$inf" ] || { echo "no $inf (Debian's hpcc)" >&2; exit 1; }
raw=$work/hpcc-$impl-times.txt
: > "$raw"
echo "hpcc under $impl: $pairs interleaved bare/layer pairs (N=400), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
for ((p = 0; p < pairs; p++)); do
  for n in ${RANKS:-2 4}; do
    order="bare layer"; ((p % 2)) && order="layer bare"
    for mode in $order; do
      d=$(mktemp -d /tmp/cohort-hpcc.XXXXXX)
      q=1; [ $n = 4 ] && q=2
      sed -e "s/^1000         Ns/400          Ns/" -e "s/^2            Ps/$q            Ps/" "$inf" \
        > "$d/hpccinf.txt"
      pre=${A_LIB:-}; [ $mode = layer ] && pre=$lib
      launcher "$impl" "$n" "$pre"
      t0=$(date +%s.%N)
      (cd "$d" && timeout 600 "${L[@]}" "$hpcc" > "$d/out" 2>&1)
      rc=$?
      t1=$(date +%s.%N)
      grep -q '^Success=1' "$d/hpccoutf.txt" 2>/dev/null || rc="$rc,no-Success"
      grep -q 'error:' "$d/out" && rc="$rc,report"
      printf '%s %s %s wall=%s rc=%s' $n $mode $p "$(awk "BEGIN{printf \"%.2f\", $t1 - $t0}")" "$rc" >> "$raw"
      for k in HPL_Tflops PTRANS_GBs MPIRandomAccess_GUPs MPIFFT_Gflops StarDGEMM_Gflops \
               AvgPingPongLatency_usec RandomlyOrderedRingLatency_usec; do
        printf ' %s=%s' $k "$(sed -n "s/^$k=//p" "$d/hpccoutf.txt" 2>/dev/null | head -1)" >> "$raw"
      done
      echo >> "$raw"
      rm -rf "$d"
    done
  done
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$raw" <<'PY'
import sys, statistics as st, collections
runs = collections.defaultdict(lambda: collections.defaultdict(dict))
bad = []
for line in open(sys.argv[1]):
    f = line.split()
    n, mode, pair, kv = f[0], f[1], f[2], dict(x.split('=', 1) for x in f[3:])
    if kv.pop('rc') != '0':
        bad.append(line.strip())
    for k, v in kv.items():
        if v:
            runs[n][(k, mode)][pair] = float(v)
lower_better = {'wall', 'AvgPingPongLatency_usec', 'RandomlyOrderedRingLatency_usec'}
for n in sorted(runs):
    print(f"{n} ranks: median over pairs, bare -> layer; slowdown = median of per-pair ratios "
          f"(> 1: slower under the layer) [min, max]")
    for k in sorted({k for k, _ in runs[n]}, key=lambda k: k != 'wall'):
        a, b = runs[n].get((k, 'bare'), {}), runs[n].get((k, 'layer'), {})
        both = sorted(set(a) & set(b))
        if not both:
            continue
        rs = [(b[p] / a[p] if k in lower_better else a[p] / b[p]) for p in both if a[p] and b[p]]
        ma, mb = st.median(a[p] for p in both), st.median(b[p] for p in both)
        r = f"{st.median(rs):.3f} [{min(rs):.3f}, {max(rs):.3f}]" if rs else "n/a"
        print(f"  {k:34} {ma:12.6g} -> {mb:12.6g}  slowdown {r}")
for l in bad:
    print("FAILED RUN:", l)
sys.exit(1 if bad else 0)
PY
rc=$?
echo "raw: $raw"
exit $rc
