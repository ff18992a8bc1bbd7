#!/bin/bash
# tri.sh ROUNDS: the tcp8 session's fixed-count loop (cbcast_n, 100000 x 8 B broadcasts), ranks pinned
# to cpus 0/1 (taskset) and nice -19: A = main before the gate (libcohort of 11dd029), B = the gate
# (B_ENV: the branch's gate variable =on, the spin's passes), C = the gate before every pass (C_ENV:
# =all, experimental); the variable is read only by branch tcpgate's library, so it is passed in
# (README.txt); order rotated per round; c2c before each round
D=$(cd $(dirname $0) && pwd)
run() { # LIBDIR env...
  local lib=$1; shift
  port=$((20000 + RANDOM % 20000)); tok=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  common=(WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COHORT_JOB_ID=t$$$RANDOM COHORT_TOKEN=$tok LOCAL_WORLD_SIZE=2 COHORT_TRANSPORT=tcp LD_LIBRARY_PATH=$lib "$@")
  env "${common[@]}" RANK=1 LOCAL_RANK=1 timeout 120 nice -n -19 taskset -c 1 $D/cbcast_n 8 ${CALLS:-100000} > /dev/null &
  env "${common[@]}" RANK=0 LOCAL_RANK=0 timeout 120 nice -n -19 taskset -c 0 $D/cbcast_n 8 ${CALLS:-100000} | grep -o '[0-9.]* us/call' | cut -d' ' -f1
  wait
}
for r in $(seq 1 $1); do
  case $((r%3)) in 1) o="A B C";; 2) o="B C A";; 0) o="C A B";; esac
  echo "# round $r $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) $(${C2C:-/tmp/tg/c2c})"
  for v in $o; do
    case $v in A) w=$(run /tmp/tg/base/build X=1);; B) w=$(run /tmp/tg/bsnap $B_ENV);; C) w=$(run /tmp/tg/bsnap $C_ENV);; esac
    echo "$v r$r wall=$w"
  done
done
