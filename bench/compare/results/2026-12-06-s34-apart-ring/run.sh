#!/bin/bash
A=/tmp/bo/build-o3/tools/cohort-perf/cohort-perf
B=/work/main/build-o3/tools/cohort-perf/cohort-perf
for i in $(seq 1 ${N:-4}); do
  for m in b2b osu; do
   [ $m = osu ] && F=--osu || F=
   for v in old new; do
    [ $v = new ] && P=$B || P=$A
    timeout 300 $P --np 2 --coll broadcast,reduce,gather --sizes 16384,32768 --time 0.1 --in-place no $F --json-out $v.2$m.$i.json > $v.2$m.$i.txt 2>&1 || echo fail $v $m $i
   done
  done
done
python3 - <<'PY'
import glob,json,statistics as S,os
d={}
for f in glob.glob('*.json'):
    v,c,i=os.path.basename(f).split('.')[:3]
    for r in json.load(open(f))['results']:
        d.setdefault((c,r['op'],r['size']),{}).setdefault(v,[]).append(r['p50_us'])
for k in sorted(d):
    a=d[k].get('old',[]); b=d[k].get('new',[])
    if a and b: print(k, 'old %.2f (%.2f-%.2f)  new %.2f (%.2f-%.2f)  x%.2f'%(S.median(a),min(a),max(a),S.median(b),min(b),max(b),S.median(b)/S.median(a)))
PY
