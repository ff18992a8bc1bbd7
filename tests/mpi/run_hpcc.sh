#!/usr/bin/env bash
# run_hpcc.sh <openmpi|mpich> <libcohort-mpi-*.so> <hpcc> - Debian's HPC
# Challenge on 2 and 4 ranks under the layer, with a small problem (N=400):
# it must succeed with no report, and its calls must have been compared.
set -u
impl=$1 lib=$2 hpcc=$3
. "$(dirname "$0")/launch.sh"
inf=/usr/share/doc/hpcc/examples/_hpccinf.txt
[ -r "$inf" ] || { echo "no $inf"; exit 1; }
fail=0
for n in 2 4; do
  d=$(mktemp -d /tmp/cohort-hpcc.XXXXXX)
  p=1; [ $n = 4 ] && p=2
  sed -e "s/^1000         Ns/400          Ns/" -e "s/^2            Ps/$p            Ps/" \
      -e "s/^2            Qs/2            Qs/" "$inf" > "$d/hpccinf.txt"
  launcher "$impl" "$n" "$lib"
  [ "$impl" = openmpi ] && L+=(-x COHORT_MPI_STATS=1) || L+=(-genv COHORT_MPI_STATS 1)
  out=$(cd "$d" && timeout 600 "${L[@]}" "$hpcc" 2>&1)
  rc=$?
  bad=""
  [ $rc = 0 ] || bad="exit code $rc"
  grep -q '^Success=1' "$d/hpccoutf.txt" 2>/dev/null || bad="$bad; hpcc did not report Success=1"
  grep -q "error:" <<<"$out" && bad="$bad; a report"
  stats=$(grep -c "^cohort-mpi: rank [0-9]*: stats: .*), all compared$" <<<"$out")
  [ "$stats" = "$n" ] || bad="$bad; $stats of $n ranks compared all their calls"
  if [ -n "$bad" ]; then
    echo "FAIL $impl hpcc -n $n: $bad"; echo "$out" | sed 's/^/    /' | head -30; fail=1
  else
    echo "ok   $impl hpcc -n $n: $(grep -m1 'stats:' <<<"$out")"
  fi
  rm -rf "$d"
done
exit $fail
