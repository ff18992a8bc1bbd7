#!/bin/bash
# m.sh TAG SIZE ITERS [env...]: per-rank perf stat (software events, syscall kinds, user/sys CPU);
# TAG ompi* = Open MPI tcp BTL (run.sh's flags), otherwise cohort --transport tcp (loopback)
EV=raw_syscalls:sys_enter,syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_writev,syscalls:sys_enter_readv,syscalls:sys_enter_poll,syscalls:sys_enter_sched_yield,syscalls:sys_enter_epoll_wait,sched:sched_wakeup,context-switches,cpu-migrations,task-clock
D=$(dirname $0)
tag=$1 s=$2 n=$3; shift 3
if [[ $tag == *ompi* ]]; then
  timeout 120 nice -n ${NICE:-0} mpirun.openmpi --allow-run-as-root -n 2 --bind-to core --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo sh -c "exec perf record -q -g -e cpu-clock -F 20000 -o $D/pr_$tag.\$OMPI_COMM_WORLD_RANK $D/bcast_n $s $n"
else
  port=$((20000 + RANDOM % 20000)); tok=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  common=(WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COHORT_JOB_ID=m$$$tag COHORT_TOKEN=$tok LOCAL_WORLD_SIZE=2 COHORT_TRANSPORT=tcp LD_LIBRARY_PATH=${LIBDIR:-/work/wt/tcp8/build} "$@")
  env "${common[@]}" RANK=1 LOCAL_RANK=1 timeout 120 nice -n ${NICE:-0} ${PIN:+taskset -c 1} perf record -q -g -e cpu-clock -F 20000 -o $D/pr_$tag.1 $D/cbcast_n $s $n &
  env "${common[@]}" RANK=0 LOCAL_RANK=0 timeout 120 nice -n ${NICE:-0} ${PIN:+taskset -c 0} perf record -q -g -e cpu-clock -F 20000 -o $D/pr_$tag.0 $D/cbcast_n $s $n
  wait
fi
