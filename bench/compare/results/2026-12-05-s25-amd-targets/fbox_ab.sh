#!/bin/bash
# 2-rank broadcast 8/64/256 B: cohort, Open MPI, Open MPI without fast boxes (btl_vader_fbox_max=0); c2c around each
N=${N:-6}; SZ=8,64,256
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
c2c() { /tmp/s25/bin/c2c 2>/dev/null | awk '{print $4}'; }
for i in $(seq $N); do
  b=$(c2c); /work/main/build-o3/tools/cohort-perf/cohort-perf --np 2 --coll broadcast --sizes $SZ --time 0.05 --in-place no --json-out /tmp/s25/c.json >/dev/null 2>&1; a=$(c2c)
  python3 -c "
import json; d=json.load(open('/tmp/s25/c.json'))
print('cohort      c2c $b/$a', ' '.join('%d:%.3f' % (r['size'], r['avg_us']) for r in d['results'] if not r['in_place']))"
  for fb in default 0; do
    extra=(); [ $fb = 0 ] && extra=(--mca btl_vader_fbox_max 0)
    b=$(c2c); o=$(mpirun.openmpi "${extra[@]}" -n 2 /tmp/s25/bin/mcb -c bcast -s $SZ -t 0.05 -l x ompi 2>/dev/null | awk '$1=="bcast" {printf "%s:%s ", $2, $4}'); a=$(c2c)
    printf "ompi fbox=%-7s c2c %s/%s %s\n" $fb $b $a "$o"
  done
done
