#!/usr/bin/env bash
# Soak: a 4-rank job running mixed collectives with checked results for a
# set time, with a fault injected into every generation (SIGKILL of a rank
# with small or large messages in flight, a rank exiting, a contract
# mismatch) and restarts by cohortrun under a new generation. Reports
# iterations, faults survived, restarts and rank 0's RSS at start and end.
# Usage: scripts/soak.sh [minutes=10] [ranks=4]   (not part of the test command)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
ranks=${2:-4}
scripts/deps.sh build
cmake -S . -B build -DCOHORT_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
state=$(mktemp /tmp/cohort-soak.XXXXXX)
trap 'rm -f "$state" "$state.tmp"' EXIT
until=$(( $(date +%s) + minutes * 60 ))
shm_before=$(ls /dev/shm | wc -l)
start=$(date +%s)
set +e
build/tools/cohortrun/cohortrun -n "$ranks" --max-restarts 100000 \
  build/tools/cohort-soak/cohort-soak --state "$state" --until "$until" --fault-every 3000 \
  2> >(grep -E "soak:|cohortrun" >&2)
rc=$?
set -e
read -r iters faults restarts rss0 rss1 errs < "$state"
echo "soak report: $(date -u +%FT%TZ), $ranks ranks, $(( $(date +%s) - start )) s"
echo "  iterations (checked):  $iters"
echo "  faults injected:        $faults (each ended in the documented error on every survivor)"
echo "  restarts:               $restarts"
echo "  rank 0 RSS:             ${rss0} kB after warm-up -> ${rss1} kB at the end"
echo "  /dev/shm entries:       before $shm_before, after $(ls /dev/shm | wc -l)"
echo "  launcher exit code:     $rc"
[ "$rc" = 0 ]
