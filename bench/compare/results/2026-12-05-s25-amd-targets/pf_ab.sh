#!/bin/bash
# 2-rank broadcast: base (build-o3) vs the reader prefetching record p+1 (pf1) / p+2 (pf2); c2c probe per launch
N=${N:-6}; SZ=${SZ:-8,64,256,1024,4096}
c2c() { /tmp/s25/bin/c2c 2>/dev/null | awk '{print $4}'; }
for i in $(seq $N); do
 for v in base pf1 pf2; do
  case $v in base) P=/work/main/build-o3/tools/cohort-perf/cohort-perf;; *) P=/tmp/s25/b$v/tools/cohort-perf/cohort-perf;; esac
  b=$(c2c); $P --np 2 --coll broadcast --sizes $SZ --time 0.05 --in-place no $OSU --json-out /tmp/s25/pf.json >/dev/null 2>&1; a=$(c2c)
  python3 -c "
import json; d=json.load(open('/tmp/s25/pf.json'))
print('%-4s c2c %s/%s' % ('$v', '$b', '$a'), ' '.join('%d:%.3f' % (r['size'], r['avg_us']) for r in d['results'] if not r['in_place']))"
 done
done
