#!/bin/bash
# quick interleaved A/B/C: openmpi 2 ranks bound, one cell; prints "<variant> <p50>"
op=$1 size=$2 pairs=$3
for ((p=0;p<pairs;p++)); do
  if ((p%2)); then order="v2 v1 old"; else order="old v1 v2"; fi
  for v in $order; do
    L=/tmp/mpicost/$v/libcohort-mpi-openmpi.so; [ $v = old ] && L=/tmp/mpicost/old/mpi/libcohort-mpi-openmpi.so
    r=$(mpirun.openmpi --allow-run-as-root -n 2 --bind-to core -x LD_PRELOAD=$L ./bench_ompi 1 $op $size 2>/dev/null | awk '{print $4, $6}')
    echo "$p $v $r"
  done
done
