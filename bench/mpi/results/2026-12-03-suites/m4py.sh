#!/usr/bin/env bash
# The mpi4py step of scripts/mpi-suites.sh (same commands).
root=/work/wt/suites; work=/tmp/cohort-mpi-suites; m4py=/work/src-suites/mpi4py-3.1.4
ompi_lib=$root/build/mpi/libcohort-mpi-openmpi.so
echo "== mpi4py $(sed -n 's/^Version: //p' "$m4py/PKG-INFO" 2>/dev/null) test suite, Open MPI, 2 ranks"
for mode in bare layer; do
  pre=(); [ $mode = layer ] && pre=(-x LD_PRELOAD="$ompi_lib" -x COHORT_MPI_STATS=1)
  echo "start $mode $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  s=$(date +%s)
  (cd "$m4py/test" && timeout 3600 mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 "${pre[@]}" \
     /usr/bin/python3 runtests.py --no-builddir -q -e test_dynproc -e test_spawn) \
     > "$work/mpi4py-$mode.log" 2>&1
  rc=$?
  echo "end $mode $(date -u +%T) $(( $(date +%s) - s ))s load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "$mode: exit $rc; $(grep -E '^Ran [0-9]+ tests' "$work/mpi4py-$mode.log" | sort -u | tr '\n' ' ')$(grep -E '^(OK|FAILED)' "$work/mpi4py-$mode.log" | sed 's/-*$//' | sort -u | tr '\n' ' ')"
  grep '^cohort-mpi' "$work/mpi4py-$mode.log" | sed 's/^/    /'
done
