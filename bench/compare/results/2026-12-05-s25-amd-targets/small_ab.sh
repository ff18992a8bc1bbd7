#!/bin/bash
# 2-rank small calls, cohort and Open MPI alternating, the core-to-core probe around each launch
N=${N:-6}; SZ=${SZ:-8,64,256,1024}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
c2c() { /tmp/s25/bin/c2c 2>/dev/null | awk '{print $4}'; }
for i in $(seq $N); do
  b=$(c2c); /work/main/build-o3/tools/cohort-perf/cohort-perf --np 2 --coll broadcast,all_reduce --sizes $SZ --time 0.05 --in-place no --json-out /tmp/s25/c.json >/dev/null 2>&1; a=$(c2c)
  python3 -c "
import json; d=json.load(open('/tmp/s25/c.json'))
print('cohort c2c $b/$a', ' '.join('%s:%d:%.3f' % (r['op'][:5], r['size'], r['avg_us']) for r in d['results'] if not r['in_place']))"
  b=$(c2c); o=$(mpirun.openmpi -n 2 /tmp/s25/bin/mcb -c bcast,allreduce -s $SZ -t 0.05 -l x ompi 2>/dev/null | awk '$1 ~ /^(bcast|allreduce)$/ {printf "%s:%s:%s ", substr($1,1,5), $2, $4}'); a=$(c2c)
  echo "ompi   c2c $b/$a $o"
done
