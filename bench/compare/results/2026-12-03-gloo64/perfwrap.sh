#!/bin/bash
# maps pseudo-algorithm names to cohort env settings
B=${REALPERF:-/work/wt/gloo64/build/tools/cohort-perf/cohort-perf}
a=$COHORT_ALGO_BROADCAST
case "$a" in
  tree*m) export COHORT_ALGO_BROADCAST=tree COHORT_CHUNK_BYTES=$(( ${a//[a-z]/} * 1048576 ));;
  main_*) export COHORT_ALGO_BROADCAST=${a#main_}; B=/work/main/build/tools/cohort-perf/cohort-perf;;
  base_*) export COHORT_ALGO_BROADCAST=${a#base_}; B=/tmp/g64/base/build/tools/cohort-perf/cohort-perf;;
  coarseP) export COHORT_ALGO_BROADCAST=tree_coarse COHORT_MAX_UNEXPECTED=1048576;;
  t64P) export COHORT_ALGO_BROADCAST=tree COHORT_CHUNK_BYTES=67108864 COHORT_MAX_UNEXPECTED=1048576;;
  spin0) export COHORT_ALGO_BROADCAST=flat COHORT_TCP_SPIN_US=0;;
  coarse0) export COHORT_ALGO_BROADCAST=tree_coarse COHORT_TCP_SPIN_US=0;;
esac
exec "$B" "$@"
