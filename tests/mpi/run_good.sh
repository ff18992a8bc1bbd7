#!/usr/bin/env bash
# run_good.sh <openmpi|mpich> <libcohort-mpi-*.so> <bindir> - a correct
# program using every checked collective must never be flagged: exit 0, no
# report, every call compared, and the same checksum as the bare run; on 2,
# 3 and 4 ranks. Then error handlers behave as without the layer.
set -u
impl=$1 lib=$2 bindir=$3
. "$(dirname "$0")/launch.sh"
fail=0
declare -A bare_sum
for n in 2 3 4; do
  launcher "$impl" "$n" ""
  bare=$(timeout 300 "${L[@]}" "$bindir/good_all" 3 2>&1)
  rc0=$?
  bare_sum[$n]=$(grep '^checksum' <<<"$bare")
  launcher "$impl" "$n" "$lib"
  [ "$impl" = openmpi ] && L+=(-x COHORT_MPI_STATS=1) || L+=(-genv COHORT_MPI_STATS 1)
  out=$(timeout 300 "${L[@]}" "$bindir/good_all" 3 2>&1)
  rc=$?
  want=$(grep '^checksum' <<<"$bare")
  got=$(grep '^checksum' <<<"$out")
  bad=""
  [ $rc0 = 0 ] && [ -n "$want" ] || bad="the bare run failed ($rc0)"
  [ $rc = 0 ] || bad="$bad; exit code $rc"
  [ "$want" = "$got" ] || bad="$bad; checksum '$got' under the layer, '$want' bare"
  grep -q "error:" <<<"$out" && bad="$bad; a report"
  stats=$(grep -c "^cohort-mpi: rank [0-9]*: stats: .*), all compared$" <<<"$out")
  [ "$stats" = "$n" ] || bad="$bad; $stats of $n ranks compared all their calls"
  if [ -n "$bad" ]; then
    echo "FAIL $impl good_all -n $n: $bad"; echo "$out" | sed 's/^/    /' | head -30; fail=1
  else
    echo "ok   $impl good_all -n $n: $got, $(grep -m1 'stats:' <<<"$out")"
  fi
done
# COHORT_MPI_STATS_FILE: the stats lines go to the file, one per rank, and
# nothing of the layer's to the program's output (harnesses such as
# MPICH's runtests fail a test on any extra output).
sf=$(mktemp /tmp/cohort-mpi-stats.XXXXXX) && rm -f "$sf"
launcher "$impl" 3 "$lib"
[ "$impl" = openmpi ] && L+=(-x COHORT_MPI_STATS_FILE="$sf") || L+=(-genv COHORT_MPI_STATS_FILE "$sf")
out=$(timeout 300 "${L[@]}" "$bindir/good_all" 1 2>&1)
rc=$?
inf=$(grep -c "^cohort-mpi: rank [0-9]*: stats: .*), all compared$" "$sf" 2>/dev/null)
if [ $rc = 0 ] && [ "$inf" = 3 ] && ! grep -q "cohort-mpi" <<<"$out"; then
  echo "ok   $impl good_all -n 3 with COHORT_MPI_STATS_FILE: 3 lines in the file, none in the output"
else
  echo "FAIL $impl COHORT_MPI_STATS_FILE: exit $rc, $inf of 3 lines in $sf"; echo "$out" | sed 's/^/    /' | head -20
  fail=1
fi
rm -f "$sf"
# COHORT_MPI=off on one rank only (a per-rank wrapper): every rank learns it
# in one collective at MPI_Init and the check is off for the whole job, rank
# 0 naming the rank - before session 38 the others waited in the layer's
# bootstrap collectives for a rank that skipped them (no output until killed).
[ "$impl" = openmpi ] && rv=OMPI_COMM_WORLD_RANK || rv=PMI_RANK
for off in 0 2; do
  launcher "$impl" 3 "$lib"
  [ "$impl" = openmpi ] && L+=(-x COHORT_MPI_STATS=1) || L+=(-genv COHORT_MPI_STATS 1)
  out=$(timeout 120 "${L[@]}" bash -c "if [ \"\$$rv\" = $off ]; then export COHORT_MPI=off; fi; exec \"$bindir/good_all\" 3" 2>&1)
  rc=$?
  other=$([ $off = 0 ] && echo 1 || echo 0)
  want="cohort-mpi: rank 0: the check is off for this job: COHORT_MPI=off on rank $off but not on rank $other (set it for the whole job, not per rank)"
  if [ $rc = 0 ] && [ "$(grep -c '^cohort-mpi' <<<"$out")" = 1 ] && grep -qxF "$want" <<<"$out" \
     && [ "$(grep '^checksum' <<<"$out")" = "${bare_sum[3]}" ]; then
    echo "ok   $impl good_all -n 3, COHORT_MPI=off on rank $off only: off for the job, said once"
  else
    echo "FAIL $impl good_all -n 3, COHORT_MPI=off on rank $off only: exit $rc"
    echo "$out" | sed 's/^/    /' | head -20; fail=1
  fi
done
# error handlers: what the program sets is what it gets (tests/mpi/good_errh.c)
launcher "$impl" 2 "$lib"
out=$(timeout 120 "${L[@]}" "$bindir/good_errh" 2>&1)
if [ $? = 0 ] && grep -q "errhandlers ok" <<<"$out"; then
  echo "ok   $impl good_errh"
else
  echo "FAIL $impl good_errh"; echo "$out" | sed 's/^/    /' | head -20; fail=1
fi
exit $fail
