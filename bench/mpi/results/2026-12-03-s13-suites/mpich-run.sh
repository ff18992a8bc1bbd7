#!/usr/bin/env bash
# The run step of scripts/mpi-suites.sh for one mode (same commands).
mode=$1; root=/work/main; work=/tmp/cohort-mpi-suites; t=$work/mpich-test
mpich_lib=$root/build/mpi/libcohort-mpi-mpich.so
stats=$work/mpich-$mode.stats
rm -f "$stats"
if [ $mode = layer ]; then export MPITEST_MPIEXECARG="-genv LD_PRELOAD $mpich_lib -genv COHORT_MPI_STATS_FILE $stats -genv COHORT_STALL_WARN 3600"
else unset MPITEST_MPIEXECARG; fi
echo "start $mode $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
(cd "$t/coll" && ../runtests -srcdir=. -tests=testlist -mpiexec=mpiexec.mpich \
   -junitfile="$work/mpich-$mode.junit.xml" -maxnp=10) > "$work/mpich-$mode.log" 2>&1
echo "end $mode $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$mode: $(grep -E 'tests failed out of|All [0-9]+ tests passed' "$work/mpich-$mode.log" | tail -1)"
grep -E '^Unexpected output|^Program .* exited without No Errors|^Failed to ' "$work/mpich-$mode.log" | sort | uniq -c | head -20 | sed 's/^/    /'
[ $mode = layer ] && echo "    layer stats: $(grep -c 'stats:' "$stats" 2>/dev/null) rank lines, $(grep -c 'NOT all compared' "$stats" 2>/dev/null) not all compared, $(awk '/stats:/ {s += $5} END {print s + 0}' "$stats" 2>/dev/null) calls checked"
true
