#!/usr/bin/env bash
# The demo in three acts, on an already built tree (scripts/demo.sh builds it):
#   1. 4 ranks train a logistic regression data-parallel under cohortrun;
#   2. the last rank passes a wrong count to all_reduce: every rank reports
#      the same precise contract error and the job ends at once;
#   3. rank 1 is SIGKILLed mid-training: cohortrun restarts the job under the
#      next generation, training resumes from the last checkpoint and ends
#      with exactly the final loss of act 1.
# Usage: scripts/demo-run.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
run=$build/tools/cohortrun/cohortrun
train=$build/examples/train
for f in "$run" "$train"; do
  [ -x "$f" ] || { echo "demo: $f is missing; build first (scripts/demo.sh)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/cohort-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
export COHORT_LOG=${COHORT_LOG:-error}   # the library's own warnings off: the errors stay
steps=60

ms() { date +%s%3N; }
show() { sed 's/^/    /' "$1"; }
# act NAME: runs the rest of the line, output in $work/NAME.log, status in $rc, time in $took.
act() {
  local name=$1; shift
  local t0; t0=$(ms)
  set +e
  "$@" >"$work/$name.log" 2>&1
  rc=$?
  set -e
  took=$(( $(ms) - t0 ))
}
final_loss() { sed -n 's/^\[0\] final loss \([^ ]*\) .*/\1/p' "$1"; }
fail=0
verdict() { if [ "$1" = ok ]; then echo "  => $2"; else echo "  => FAILED: $2"; fail=1; fi; }

echo "== Act 1: four ranks train together"
echo "   cohortrun -n 4 train --steps $steps --ckpt-dir DIR"
echo "   Each rank builds its own shard of a synthetic data set, computes its gradient, and one"
echo "   all_reduce per step averages gradient and loss across ranks. Rank 0 prints and checkpoints."
act normal "$run" -n 4 "$train" --steps $steps --ckpt-dir "$work/ckpt-normal"
show "$work/normal.log"
loss1=$(final_loss "$work/normal.log")
if [ $rc -eq 0 ] && [ -n "$loss1" ]; then
  verdict ok "trained in $took ms; final loss $loss1"
else
  verdict bad "exit code $rc"
fi
echo

echo "== Act 2: one rank calls all_reduce with the wrong count"
echo "   cohortrun -n 4 train --mismatch-at 25"
echo "   At step 25 rank 3 passes 17 elements where the others pass 18. In NCCL, Gloo or MPI this"
echo "   hangs or silently reduces the wrong data. Here every rank compares contracts first:"
act mismatch "$run" -n 4 "$train" --steps $steps --ckpt-dir "$work/ckpt-mismatch" --mismatch-at 25
show "$work/mismatch.log"
n=0
for r in 0 1 2 3; do
  grep -q "^\[$r\] rank $r: step 25: all_reduce of the gradients failed: COHORT_ERR_CONTRACT: .*count differs" \
    "$work/mismatch.log" && n=$((n + 1))
done
if [ $rc -ne 0 ] && [ $n -eq 4 ] && [ $took -lt 10000 ]; then
  verdict ok "all 4 ranks got COHORT_ERR_CONTRACT naming the call, the field and the odd rank; the job ended in $took ms (exit $rc)"
else
  verdict bad "exit $rc, $n of 4 ranks reported the contract error, $took ms"
fi
echo

echo "== Act 3: a worker dies; cohortrun restarts the job under a new generation"
echo "   cohortrun -n 4 --max-restarts 1 train --kill-at 37"
echo "   Rank 1 SIGKILLs itself at step 37 (first incarnation only). cohortrun stops the others,"
echo "   starts all four again with COHORT_GENERATION=2, and rank 0 resumes from the checkpoint"
echo "   of step 30. The store lives in cohortrun, so it outlives the workers."
act restart "$run" -n 4 --max-restarts 1 "$train" --steps $steps --ckpt-dir "$work/ckpt-restart" --kill-at 37
show "$work/restart.log"
loss3=$(final_loss "$work/restart.log")
if [ $rc -eq 0 ] && grep -q "generation 2, 4 ranks: resuming" "$work/restart.log" &&
   [ -n "$loss3" ] && [ "$loss3" = "$loss1" ]; then
  verdict ok "restarted once, resumed at step 30, final loss $loss3 = act 1's, digit for digit ($took ms)"
else
  verdict bad "exit $rc; final loss '$loss3' vs act 1 '$loss1'"
fi
echo
if [ $fail -eq 0 ]; then
  echo "demo: all three acts behaved as described."
else
  echo "demo: some act did not behave as described (see above)." >&2
fi
exit $fail
