#!/bin/bash
# A = before, B = compact 32 B records, C = compact records padded to 64 B (one a line)
A=/tmp/s26/A/b/tools/cohort-perf/cohort-perf
B=/work/main/build-o3/tools/cohort-perf/cohort-perf
C=/tmp/s26/Cb/tools/cohort-perf/cohort-perf
for r in $(seq 1 ${ROUNDS:-4}); do
  for v in ${VARS:-A B C}; do
    eval bin=\$$v
    st=$(/tmp/s26/c2c 0 1 | tail -1 | awk '{print $4}')
    $bin --np 2 --coll broadcast --sizes ${SIZES:-8} --time 0.3 --in-place no --json-out /tmp/s26/ab3.json >/dev/null 2>&1
    python3 -c "
import json;d=json.load(open('/tmp/s26/ab3.json'))
for x in d['results']: print('$r $v c2c=$st', x['op'], x['size'], 'avg %.4f p50 %.3f p99 %.3f'%(x['avg_us'],x['step_p50_us'],x['step_p99_us']))"
  done
done
