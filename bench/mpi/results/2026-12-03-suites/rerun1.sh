#!/usr/bin/env bash
# rerun1.sh <test> <np> <bare|layer> <timeout_s> [args...]: one MPICH coll test alone.
tst=$1 np=$2 mode=$3 to=$4; shift 4
root=/work/wt/suites; work=/tmp/cohort-mpi-suites; t=$work/mpich-test
stats=$work/rerun-$tst-$np-$mode.stats; rm -f $stats
pre=(); [ $mode = layer ] && pre=(-genv LD_PRELOAD $root/build/mpi/libcohort-mpi-mpich.so -genv COHORT_MPI_STATS_FILE $stats -genv COHORT_STALL_WARN 3600)
l0=$(cut -d' ' -f1 /proc/loadavg); s=$(date +%s)
out=$(cd $t/coll && MPIEXEC_TIMEOUT=$to timeout $((to+30)) mpiexec.mpich -n $np "${pre[@]}" ./$tst "$@" 2>&1); rc=$?
e=$(( $(date +%s) - s ))
res=fail; [ "$(echo "$out" | tr -d '\r' | sed '/^$/d')" = " No Errors" ] && res=pass
echo "$(date -u +%T) $tst $np $mode: $res rc=$rc ${e}s load $l0-$(cut -d' ' -f1 /proc/loadavg)$( [ $mode = layer ] && echo "; stats: $(grep -c 'stats:' $stats 2>/dev/null) lines, $(grep -c 'NOT all compared' $stats 2>/dev/null) not all, $(awk '/stats:/ {s += $5} END {print s + 0}' $stats 2>/dev/null) calls")"
[ $res = pass ] || echo "$out" | tail -5 | sed 's/^/    /'
