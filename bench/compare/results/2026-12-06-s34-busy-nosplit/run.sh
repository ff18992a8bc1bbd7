#!/bin/bash
A=/work/main/build-o3/tools/cohort-perf/cohort-perf
B=/tmp/bx/build-o3/tools/cohort-perf/cohort-perf
for i in $(seq 1 ${N:-3}); do
 for np in 4 8; do
  [ $np = 4 ] && S=131072,262144,1048576,4194304 || S=262144,524288,1048576,4194304
  for m in b2b osu; do
   [ $m = osu ] && F=--osu || F=
   for v in def ns; do
    [ $v = ns ] && P=$B || P=$A
    timeout 300 $P --np $np --coll scatter,gather --sizes $S --time 0.1 --in-place no $F --json-out $v.$np$m.$i.json > $v.$np$m.$i.txt 2>&1 || echo fail $v $np $m $i
   done
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
    a=d[k].get('def',[]); b=d[k].get('ns',[])
    if a and b: print(k, 'def %.1f (%.1f-%.1f)  ns %.1f (%.1f-%.1f)  x%.2f'%(S.median(a),min(a),max(a),S.median(b),min(b),max(b),S.median(b)/S.median(a)))
PY
