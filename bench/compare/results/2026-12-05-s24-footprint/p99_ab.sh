#!/bin/bash
# A/B of builds with p50/p99: base (d7dfbab8), new (main), x2 (lead 2 MiB); broadcast rows
N=${N:-3}; NP=${NP:-16}
for i in $(seq $N); do
 for v in ${VARS:-base new x2}; do
  case $v in base) P=/tmp/b24/tools/cohort-perf/cohort-perf;; new) P=/work/main/build-o3/tools/cohort-perf/cohort-perf;; x2) P=/tmp/bx2/tools/cohort-perf/cohort-perf;; esac
  $P --np $NP --coll ${COLL:-all_reduce,broadcast} --sizes ${SIZES:-8,1024,4096,16384,67108864} --time 0.03 --in-place no $OSU --json-out /tmp/p99.json > /dev/null 2>&1
  python3 -c "
import json,sys
d=json.load(open('/tmp/p99.json'))
s='$v'
for r in d['results']:
    if r['op']=='broadcast' and r['size']<=16384:
        s+=' %d: %.2f/%.2f/%.1f' % (r['size'], r['avg_us'], r['step_p50_us'], r['step_p99_us'])
print(s)"
 done
done
