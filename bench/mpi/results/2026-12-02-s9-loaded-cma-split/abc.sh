#!/bin/bash
# usage: abc.sh reps bin args... ; variants in $VARS (names) with env V_<name>="mpirun opts"
L=/work/wt/mpi1m/build/mpi; reps=$1; shift
for ((p=0;p<reps;p++)); do
  vs=($VARS); k=$((p % ${#vs[@]})); order=("${vs[@]:k}" "${vs[@]:0:k}")
  for v in "${order[@]}"; do eval "opts=\$V_$v"
    echo "$v $p $(mpirun.openmpi --allow-run-as-root -n 2 --bind-to core $opts "$@" 2>&1 | grep -E 'bcast 1048576|cma_split' | tr '\n' ' ')"
  done
done
