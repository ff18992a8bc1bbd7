#!/bin/bash
# reduce_scatter, 2 ranks: A = 2da3f8f2 (two copies through the segment), B = working tree (single copy from RS_FROM)
A=/tmp/s26/Bw/b/tools/cohort-perf/cohort-perf
B=/work/main/build-o3/tools/cohort-perf/cohort-perf
for r in $(seq 1 ${ROUNDS:-4}); do
  for v in A B; do
    eval bin=\$$v
    st=$(/tmp/s26/c2c 0 1 | tail -1 | awk '{print $4}')
    $bin --np 2 --coll reduce_scatter --sizes ${SIZES:-16384,32768,65536,262144,1048576,4194304,16777216,67108864} --time 0.1 --in-place no $OSU --json-out /tmp/s26/rs.json >/dev/null 2>&1
    python3 -c "
import json;d=json.load(open('/tmp/s26/rs.json'))
print('$r $v c2c=$st', ' '.join('%d:%.2f'%(x['size'],x['avg_us']) for x in d['results']))"
  done
done
