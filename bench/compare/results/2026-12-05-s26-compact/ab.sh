#!/bin/bash
# paired A/B: A = HEAD before compact records, B = working tree; 2 ranks broadcast back to back and OSU
A=/tmp/s26/A/b/tools/cohort-perf/cohort-perf
B=/work/main/build-o3/tools/cohort-perf/cohort-perf
C2C=/tmp/s26/c2c
for r in $(seq 1 ${ROUNDS:-4}); do
  for v in A B; do
    eval bin=\$$v
    st=$($C2C 0 1 | tail -1 | awk '{print $4}')
    for mode in "" "--osu"; do
      $bin --np 2 --coll broadcast,all_reduce --sizes 8,64 --time 0.3 --in-place no $mode --json-out /tmp/s26/ab.json >/dev/null 2>&1
      python3 -c "
import json,sys;d=json.load(open('/tmp/s26/ab.json'))
for x in d['results']: print('$r $v c2c=$st ${mode:-b2b}', x['op'], x['size'], 'avg %.4f p50 %.3f p99 %.3f'%(x['avg_us'],x['step_p50_us'],x['step_p99_us']))"
    done
  done
done
