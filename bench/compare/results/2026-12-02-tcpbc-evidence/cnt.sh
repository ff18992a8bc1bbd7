#!/bin/bash
# cnt.sh TAG SIZE ITERS [env...]: per-rank perf stat of syscalls, context switches; cohort (tcp, loopback) or ompi (TAG starting with ompi)
P=${PERF:-/work/wt/tcpbc/build/tools/cohort-perf/cohort-perf}
EV=syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_writev,syscalls:sys_enter_readv,syscalls:sys_enter_poll,syscalls:sys_enter_sched_yield,sched:sched_wakeup,sched:sched_migrate_task,context-switches,cpu-migrations,task-clock
tag=$1 s=$2 n=$3; shift 3
if [[ $tag == ompi* ]]; then
  timeout 120 mpirun.openmpi --allow-run-as-root -n 2 --bind-to core --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo sh -c "exec perf stat -x, -e $EV -o /tmp/tcpbc/ps_$tag.\$OMPI_COMM_WORLD_RANK ./bcast_n $s $n"
else
  port=$((20000 + RANDOM % 20000)); tok=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  common=(WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COHORT_JOB_ID=ps$$$tag COHORT_TOKEN=$tok LOCAL_WORLD_SIZE=2 "$@")
  A=(--transport tcp --coll broadcast --sizes $s --iters $n --warmup 5 --in-place no)
  env "${common[@]}" RANK=1 LOCAL_RANK=1 perf stat -x, -e $EV -o ps_$tag.1 $P "${A[@]}" >/dev/null 2>&1 &
  env "${common[@]}" RANK=0 LOCAL_RANK=0 perf stat -x, -e $EV -o ps_$tag.0 $P "${A[@]}" 2>&1 | grep -v '^#' | grep -v '^$' | tail -1
  wait
fi
for r in 0 1; do printf "%s rank%d per call:" $tag $r; awk -F, -v n=$n '/^[0-9.]/{e=$3; sub(/syscalls:sys_enter_/,"",e); if (e=="task-clock") printf " cpu_us=%.2f", $1*1000/n; else printf " %s=%.3f", e, $1/n}' ps_$tag.$r; echo; done
