#!/bin/bash
# A/B of COHORT_SHM_RING_PACE (0/1) in one build: broadcast avg / step p50 / step p99 after an all_reduce sweep
N=${N:-3}; NP=${NP:-16}; P=${P:-/work/main/build-o3/tools/cohort-perf/cohort-perf}
for i in $(seq $N); do
 for v in ${VARS:-0 1}; do
  COHORT_SHM_RING_PACE=$v $P --np $NP --coll ${COLL:-all_reduce,broadcast} --sizes ${SIZES:-8,1024,4096,16384,67108864} --time 0.03 --in-place no $OSU --json-out /tmp/pace.json > /dev/null 2>&1
  python3 -c "
import json,sys
d=json.load(open('/tmp/pace.json'))
s='pace=$v np=$NP'
for r in d['results']:
    if r['op']=='broadcast' and r['size']<=16384:
        s+=' %d: %.2f/%.2f/%.1f' % (r['size'], r['avg_us'], r['step_p50_us'], r['step_p99_us'])
print(s)"
 done
done
