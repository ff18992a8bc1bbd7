#!/bin/bash
# A = 83bbea8d (no compact records), B = 2da3f8f2 (compact records for <= 8 B), D = working tree (<= 16 B)
A=/tmp/s26/A/b/tools/cohort-perf/cohort-perf
B=/tmp/s26/Bw/b/tools/cohort-perf/cohort-perf
D=/work/main/build-o3/tools/cohort-perf/cohort-perf
for r in $(seq 1 ${ROUNDS:-4}); do
  for v in ${VARS:-A B D}; do
    eval bin=\$$v
    st=$(/tmp/s26/c2c 0 1 | tail -1 | awk '{print $4}')
    $bin --np 2 --coll all_reduce,broadcast --sizes ${SIZES:-8,16,64} --time 0.2 --in-place no $OSU --json-out /tmp/s26/ab5.json >/dev/null 2>&1
    python3 -c "
import json;d=json.load(open('/tmp/s26/ab5.json'))
print('$r $v c2c=$st', ' '.join('%s%d:%.4f'%(x['op'][0],x['size'],x['avg_us']) for x in d['results']))"
  done
done
