#!/bin/bash
P=/work/main/build-o3/tools/cohort-perf/cohort-perf
N=${N:-4}; NP=${NP:-16}
for i in $(seq $N); do
 for v in ${VARS:-unb l512 k32}; do
  unset COHORT_SHM_RING_LEAD_BYTES COHORT_SHM_RING_SLOTS
  case $v in unb) export COHORT_SHM_RING_LEAD_BYTES=1099511627776;; l512) export COHORT_SHM_RING_LEAD_BYTES=524288;; k32) export COHORT_SHM_RING_SLOTS=32 COHORT_SHM_RING_LEAD_BYTES=1099511627776;; k128) export COHORT_SHM_RING_SLOTS=128 COHORT_SHM_RING_LEAD_BYTES=1099511627776;; def) ;; esac
  $P --np $NP --coll all_reduce,broadcast --sizes ${SIZES:-8,1024,4096,16384,65536,1048576,67108864} --time 0.03 --in-place no 2>&1 |
   awk -v v=$v '/^# Collective:/ {b = ($3=="broadcast")} b && $1 ~ /^[0-9]+$/ {s = s " " $1 " " $6} END {print v s}'
 done
done
