#!/bin/bash
# cg.sh TAG SIZE ITERS RANK: callgrind on one rank (the other native); total user-space Ir of that rank
D=$(dirname $0); tag=$1 s=$2 n=$3 rk=$4
VG="valgrind --tool=callgrind --callgrind-out-file=$D/cg_$tag.out"
if [[ $tag == *ompi* ]]; then
  timeout 300 mpirun.openmpi --allow-run-as-root -n 2 --bind-to core --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo sh -c "if [ \$OMPI_COMM_WORLD_RANK = $rk ]; then exec $VG $D/bcast_n $s $n; else exec $D/bcast_n $s $n; fi" 2>$D/cg_$tag.err
else
  port=$((20000 + RANDOM % 20000)); tok=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  common=(WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COHORT_JOB_ID=cg$$$tag COHORT_TOKEN=$tok LOCAL_WORLD_SIZE=2 COHORT_TRANSPORT=tcp LD_LIBRARY_PATH=/work/wt/tcp8/build)
  for r in 0 1; do
    if [ $r = $rk ]; then env "${common[@]}" RANK=$r LOCAL_RANK=$r timeout 300 $VG $D/cbcast_n $s $n 2>$D/cg_$tag.err &
    else env "${common[@]}" RANK=$r LOCAL_RANK=$r timeout 300 $D/cbcast_n $s $n & fi
  done; wait
fi
grep -h "Collected" $D/cg_$tag.err | sed "s/^/$tag /"
