#!/usr/bin/env bash
# Soak: a 4-rank job running mixed collectives with checked results for a
# set time, with one fault injected into every generation (a rank SIGKILLed
# with small or large messages in flight, a rank exiting without finalize, a
# contract mismatch), and cohortrun restarting the job under a new
# generation each time. Reports iterations, faults survived, restarts,
# every survivor's outcome, and memory (worker RSS per generation; the
# launcher, which hosts the store for the whole run, at start and end).
# Usage: scripts/soak.sh [minutes=10] [ranks=4] [fault_every=8000]
# Not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
ranks=${2:-4}
every=${3:-8000}
scripts/deps.sh build
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target cohortrun cohort-soak >/dev/null
dir=$(mktemp -d /tmp/cohort-soak.XXXXXX)
trap 'rm -rf "$dir"' EXIT
until=$(( $(date +%s) + minutes * 60 ))
shm_before=$(ls /dev/shm | wc -l)
fds_before=$(ls /proc/self/fd | wc -l)
start=$(date +%s)
set +e
build/tools/cohortrun/cohortrun -n "$ranks" --max-restarts 100000 \
  build/tools/cohort-soak/cohort-soak --state "$dir/state" --log "$dir/log" \
  --until "$until" --fault-every "$every" >"$dir/out" 2>"$dir/err" &
launcher=$!
sleep 5 # sampling cadence for the launcher's RSS, not synchronisation
rss_l0=$(awk '/VmRSS/{print $2}' /proc/$launcher/status 2>/dev/null || echo "?")
rss_l1=$rss_l0
while kill -0 $launcher 2>/dev/null; do
  r=$(awk '/VmRSS/{print $2}' /proc/$launcher/status 2>/dev/null) && rss_l1=${r:-$rss_l1}
  sleep 5
done
wait $launcher
rc=$?
set -e
read -r iters faults restarts rss0 rss1 errs < "$dir/state"
gens=$((restarts + 1))
expected=$(grep -c " expected$" "$dir/log" || true)
unexpected=$(grep -c "UNEXPECTED" "$dir/log" || true)
okruns=$(grep -c " ok$" "$dir/log" || true)
echo "cohort soak report ($(date -u +%FT%TZ))"
echo "  ranks, duration:            $ranks ranks, $(( $(date +%s) - start )) s"
echo "  iterations (all checked):   $iters"
echo "  generations:                $gens (restarts: $restarts)"
echo "  faults injected, survived:  $restarts (one per generation except the last)"
echo "  survivor outcomes:          $expected documented errors, $unexpected unexpected, $okruns clean finishes"
echo "  wrong results:              $(grep -c 'WRONG RESULT' "$dir/err" || true)"
awk '$6 > 5000 && $10 > 0 {g=$12-$10; if (g>max) max=g; n++; s+=g} END {
  if (n) printf "  worker RSS growth in a generation: mean %.0f kB, max %d kB (over %d rank-generations of >5000 iterations)\n", s/n, max, n }' "$dir/log"
echo "  launcher (store) RSS:       ${rss_l0} kB at start -> ${rss_l1} kB at the end"
echo "  /dev/shm entries:           before $shm_before, after $(ls /dev/shm | wc -l)"
echo "  launcher exit code:         $rc"
[ "$rc" = 0 ] && [ "$unexpected" = 0 ]
