#!/usr/bin/env bash
# interleaved selftime A/B: A=$1 dir, B=$2 dir, reps $3, out file $4, cells "op:size ..." in CELLS, RANKS (2)
A=$1 B=$2 reps=$3 out=$4 n=${RANKS:-2}
for ((r = 0; r < reps; r++)); do
  order="A B"; ((r % 2)) && order="B A"
  for impl in openmpi mpich; do for cell in $CELLS; do op=${cell%:*} sz=${cell#*:}
    for ab in $order; do d=$A; [ $ab = B ] && d=$B
      if [ $impl = openmpi ]; then o=$(mpirun.openmpi --allow-run-as-root -n $n ${OMPI_EXTRA:---bind-to core} -x LD_PRELOAD=$d/libcohort-mpi-openmpi.so /tmp/mpi4k-bench-ompi ${SCALE:-0.3} $op $sz 2>&1)
      else o=$(mpiexec.mpich -n $n -bind-to core ${MPICH_EXTRA:-} -genv LD_PRELOAD $d/libcohort-mpi-mpich.so /tmp/mpi4k-bench-mpich ${SCALE:-0.3} $op $sz 2>&1); fi
      echo "$o" | grep 'selftime:' | sed -E "s/^cohort-mpi: rank ([0-9]+): selftime: .*p10 ([0-9]+) ns, p50 ([0-9]+) ns, p90 ([0-9]+) ns, p99 ([0-9]+) ns.*/$impl $op $sz $ab $r rank \1 p10 \2 p50 \3 p90 \4 p99 \5 load $(cut -d' ' -f1 /proc/loadavg)/" >> $out
    done; done; done
done
