#!/bin/sh
# p2p_ab.sh [ROUNDS] - send/recv between two ranks of one host: the segment's
# channels (default) against the old path (COHORT_SHM_P2P_BYTES=0: tcp over
# loopback), paired and interleaved (A, B, A, B ...), cohort-perf's sendrecv
# (one-way time of a ping-pong) with p50/p99/max. MPI=1 adds Open MPI's
# MPI_Send/MPI_Recv ping-pong (mpi_pingpong.c, mpirun.openmpi -np 2, its
# default binding and transports) as a third interleaved config, MPICH=1
# MPICH's (mpirun.mpich) as a fourth. IP=0 (default): separate send and
# receive buffers, the send buffer never rewritten (cohort-perf
# --in-place no, mpi_pingpong oop); IP=1: one buffer, each message the one
# just received (cohort-perf's in-place rows, mpi_pingpong ip). Before
# 2026-12-04 the MPI side always ran the in-place form against cohort's
# out-of-place rows (docs/performance.md says what that changed). BASE=<build
# dir> adds that build's cohort-perf (e.g. main's, before a change) as one
# more interleaved config, "base", and the ratio shm/base; TCP=0 leaves the
# tcp config out. Prints medians over launches and the per-pair ratio's
# median and range; raw outputs in $OUT (default
# bench/compare/results/p2p-<date>).
set -eu
ROUNDS=${1:-5}
BUILD=${BUILD:-build}
SIZES=${SIZES:-8,4096,16384,65536,262144,1048576,16777216}
OUT=${OUT:-bench/compare/results/p2p-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
perf="$BUILD/tools/cohort-perf/cohort-perf"
MPI=${MPI:-0}
MPICH=${MPICH:-0}
IP=${IP:-0}
if [ "$IP" = 1 ]; then FORM=ip; INPLACE=yes; else FORM=oop; INPLACE=no; fi
BASE=${BASE:-}
TCP=${TCP:-1}
CFGS="shm"
[ -n "$BASE" ] && CFGS="$CFGS base"
[ "$TCP" = 1 ] && CFGS="$CFGS tcp"
if [ "$MPI" = 1 ]; then
  mpicc.openmpi -O2 -o "$OUT/mpi_pingpong" "$(dirname "$0")/mpi_pingpong.c"
  CFGS="$CFGS ompi"
fi
if [ "$MPICH" = 1 ]; then
  mpicc.mpich -O2 -o "$OUT/mpi_pingpong.mpich" "$(dirname "$0")/mpi_pingpong.c"
  CFGS="$CFGS mpich"
fi
# the cpu0<->cpu1 cache-line round trip (c2c.c) before every launch: an 8 B
# ping-pong moves with it (docs/performance.md, "Which mode a 2-rank launch is in")
cc -O2 -Wall -pthread -o "$OUT/c2c" "$(dirname "$0")/c2c.c"
{ uname -r; grep -m1 'model name' /proc/cpuinfo; cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo "no yama";
  git rev-parse --short HEAD; date -u; echo "form: $FORM";
  [ "$MPI" = 1 ] && ompi_info --param btl vader --level 9 2>/dev/null | grep -m1 single_copy_mechanism;
  true; } > "$OUT/conditions.txt"
for r in $(seq 1 "$ROUNDS"); do
  for cfg in $CFGS; do
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)" > "$OUT/$cfg.$r.txt"
    echo "# $("$OUT/c2c" || echo c2c failed)" >> "$OUT/$cfg.$r.txt"
    if [ $cfg = ompi ]; then
      mpirun.openmpi --allow-run-as-root -np 2 "$OUT/mpi_pingpong" "$SIZES" 0.1 $FORM \
        >> "$OUT/$cfg.$r.txt" 2>&1 || echo "launch failed" >> "$OUT/$cfg.$r.txt"
      echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/$cfg.$r.txt"
      continue
    fi
    if [ $cfg = mpich ]; then
      mpirun.mpich -np 2 "$OUT/mpi_pingpong.mpich" "$SIZES" 0.1 $FORM \
        >> "$OUT/$cfg.$r.txt" 2>&1 || echo "launch failed" >> "$OUT/$cfg.$r.txt"
      echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/$cfg.$r.txt"
      continue
    fi
    if [ $cfg = tcp ]; then env="COHORT_SHM_P2P_BYTES=0"; else env=""; fi
    bin=$perf
    [ $cfg = base ] && bin="$BASE/tools/cohort-perf/cohort-perf"
    env $env "$bin" --np 2 --coll sendrecv --sizes "$SIZES" --time 0.1 --percentiles \
      --in-place $INPLACE >> "$OUT/$cfg.$r.txt" 2>&1 || echo "launch failed" >> "$OUT/$cfg.$r.txt"
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/$cfg.$r.txt"
  done
done
python3 - "$OUT" "$ROUNDS" "$CFGS" <<'PY'
import sys, statistics as S
out, rounds, cfgs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def parse(p):
    rows = {}
    for l in open(p):
        f = l.split()
        if len(f) == 12 and f[0].isdigit():   # cohort-perf: time p50 p99 max
            rows[int(f[0])] = (float(f[5]), float(f[9]), float(f[10]), float(f[11]))
        elif len(f) == 19 and f[0].isdigit(): # cohort-perf --in-place yes: the in-place ones
            rows[int(f[0])] = (float(f[9]), float(f[16]), float(f[17]), float(f[18]))
        elif len(f) == 5 and f[0].isdigit():  # mpi_pingpong: p50 p99 max mean
            rows[int(f[0])] = (float(f[4]), float(f[1]), float(f[2]), float(f[3]))
    return rows
d = {c: [parse(f"{out}/{c}.{r}.txt") for r in range(1, rounds + 1)] for c in cfgs}
print("form: " + open(f"{out}/conditions.txt").read().split("form: ")[-1].split()[0])
others = [c for c in cfgs if c != "shm"]
print("bytes  shm p50/p99/max (us)  " + "  ".join(f"| {c} p50/p99/max (us), p50 ratio shm/{c} median (min-max over launch pairs)" for c in others))
med = lambda v, i: S.median([x[i] for x in v])
for b in sorted(d["shm"][0]):
    a = [x[b] for x in d["shm"] if b in x]
    line = f"{b:>9} {med(a,1):9.2f} {med(a,2):9.2f} {med(a,3):10.1f}"
    for c in others:
        o = [x[b] for x in d[c] if b in x]
        ro = [x[1] / y[1] for x, y in zip([x.get(b) for x in d["shm"]], [x.get(b) for x in d[c]]) if x and y and y[1] > 0]
        if o and ro:
            line += f"   {c} {med(o,1):9.2f} {med(o,2):9.2f} {med(o,3):10.1f}  shm/{c} x{S.median(ro):.2f} ({min(ro):.2f}-{max(ro):.2f})"
    print(line)
c2c = {c: [l.split()[4] for r in range(1, rounds + 1) for l in open(f"{out}/{c}.{r}.txt") if l.startswith("# c2c ")] for c in cfgs}
print("c2c p50 ns before each launch (cpu0<->cpu1 round trip; - = no batch completed): " + "; ".join(f"{c} " + " ".join(c2c[c]) for c in cfgs))
PY
