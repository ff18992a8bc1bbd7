#!/bin/bash
# Store benchmark: cohort's store (C clients, cohort-store server) side by side
# with PyTorch 1.13's TCPStore (Python clients, C++ server), cell by cell and
# alternating which goes first, REPS times; summarised as medians with ratios.
#
# usage: bench/store/run.sh [--quick] [--reps N] [BUILD_DIR]
#   BUILD_DIR defaults to ./build (configured with cmake; store_bench and
#   cohort-store are built if missing). Results: bench/store/results/<date>/
#   raw.jsonl (every run) and summary.md (the tables for docs/performance.md).
# Needs /usr/bin/python3 with python3-torch (Debian). Loopback only.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ARGS="$*"
QUICK=0
REPS=3
BUILD="$ROOT/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; REPS=1 ;;
    --reps) REPS="$2"; shift ;;
    *) BUILD="$(cd "$1" && pwd)" ;;
  esac
  shift
done
make -C "$BUILD" -j2 store_bench cohort-store >/dev/null
BENCH="$BUILD/bench/store/store_bench --store-bin $BUILD/tools/cohort-store/cohort-store"
PY="/usr/bin/python3 $HERE/bench_tcpstore.py"
OUT="$HERE/results/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
RAW="$OUT/raw.jsonl"
DUR=2
[ $QUICK = 1 ] && DUR=1
{
  echo "# date: $(date -Iseconds)"
  echo "# host: $(uname -srm), $(nproc) cpus, load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# command: $0 $ARGS"
} > "$OUT/meta.txt"
cat "$OUT/meta.txt"

run() { # impl args...
  local impl=$1; shift
  local t=600
  if [ "$impl" = cohort ]; then timeout $t $BENCH "$@" >> "$RAW" || echo "cohort $* failed" >&2
  else timeout $t $PY "$@" >> "$RAW" || echo "tcpstore $* failed" >&2; fi
}
both() { # alternate the order per repetition
  if [ $((rep % 2)) = 1 ]; then run cohort "$@"; run tcpstore "$@"
  else run tcpstore "$@"; run cohort "$@"; fi
}

for rep in $(seq 1 "$REPS"); do
  echo "== repetition $rep/$REPS (load $(cut -d' ' -f1 /proc/loadavg))"
  for n in 1 16 64; do
    for cell in "set 16" "set_nowait 16" "get 16" "add 8" "set 1048576" "get 1048576"; do
      set -- $cell
      both tp $n $1 $2 $DUR
    done
  done
  for n in 64 256 1024; do
    if [ $QUICK = 1 ] && [ $n = 1024 ]; then continue; fi
    rounds=3; [ $n = 1024 ] && rounds=2
    both rdzv $n $rounds
  done
  both stall 16 $DUR
done
/usr/bin/python3 "$HERE/compare.py" "$RAW" > "$OUT/summary.md"
cat "$OUT/summary.md"
echo "results in $OUT"
