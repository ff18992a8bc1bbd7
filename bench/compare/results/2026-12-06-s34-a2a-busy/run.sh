#!/bin/bash
P=/work/main/build-o3/tools/cohort-perf/cohort-perf
for i in $(seq 1 ${N:-3}); do
 for np in 4; do
  [ $np = 4 ] && S=131072,262144,1048576,4194304,16777216 || S=65536,131072,262144,524288
  for m in b2b osu; do
   [ $m = osu ] && F=--osu || F=
   for v in def sc; do
    if [ $v = sc ]; then E="COHORT_SHM_SINGLE_COPY=on COHORT_SHM_SINGLE_COPY_BYTES=65536"; else E=; fi
    env $E timeout 300 $P --np $np --coll all_to_all --sizes $S --time 0.1 --in-place no $F --json-out $v.$np$m.$i.json > $v.$np$m.$i.txt 2>&1 || echo fail $v $np $m $i
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
        d.setdefault((c,r['op'],r['size']),{}).setdefault(v,[]).append(r.get('p50_us',r['avg_us']))
for k in sorted(d):
    a=d[k].get('def',[]); b=d[k].get('sc',[])
    if a and b: print(k, 'def %.1f (%.1f-%.1f)  sc %.1f (%.1f-%.1f)  x%.2f'%(S.median(a),min(a),max(a),S.median(b),min(b),max(b),S.median(b)/S.median(a)))
PY
