#!/bin/bash
P=/work/main/build-o3/tools/cohort-perf/cohort-perf
S=${S:-8,256,4096}
for i in $(seq 1 ${N:-4}); do
  for v in ${VS:-0 20 200}; do
    COHORT_TCP_SPIN_US=$v timeout 300 $P --np 4 --transport tcp --coll broadcast,reduce,gather --sizes $S --time 0.2 --in-place no --json-out s$v.4.$i.json > s$v.4.$i.txt 2>&1 || echo fail
  done
done
python3 - <<'PY'
import glob,json,statistics as S,os
d={}
for f in glob.glob('*.json'):
    v,np,i=os.path.basename(f).split('.')[:3]
    for r in json.load(open(f))['results']:
        d.setdefault((r['op'],r['size']),{}).setdefault(v,[]).append(r['avg_us'])
for k in sorted(d):
    print(k, '  '.join('%s %.2f (%.2f-%.2f)'%(v,S.median(x),min(x),max(x)) for v,x in sorted(d[k].items())))
PY
