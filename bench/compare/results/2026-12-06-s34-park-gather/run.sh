#!/bin/bash
A=/work/main/build-o3/tools/cohort-perf/cohort-perf
B=/tmp/bp/build-o3/tools/cohort-perf/cohort-perf
S=65536,262144,1048576,4194304,16777216
for i in $(seq 1 ${N:-3}); do
  for m in b2b osu; do
   [ $m = osu ] && F=--osu || F=
   for v in def pk; do
    [ $v = pk ] && P=$B || P=$A
    timeout 300 $P --np 4 --transport tcp --coll gather,reduce --sizes $S --time 0.1 --in-place no $F --json-out $v.4$m.$i.json > $v.4$m.$i.txt 2>&1 || echo fail $v $m $i
   done
  done
done
python3 - <<'PY'
import glob,json,statistics as S,os
d={}
for f in glob.glob('*.json'):
    v,c,i=os.path.basename(f).split('.')[:3]
    for r in json.load(open(f))['results']:
        d.setdefault((c,r['op'],r['size']),{}).setdefault(v,[]).append((r['avg_us'],r['p50_us'],r['p99_us']))
for k in sorted(d):
    a=d[k].get('def',[]); b=d[k].get('pk',[])
    if a and b:
        am=S.median(x[0] for x in a); bm=S.median(x[0] for x in b)
        print(k, 'mean def %.1f (%.1f-%.1f) pk %.1f (%.1f-%.1f) x%.2f | p50 %.1f / %.1f | p99 %.0f / %.0f'%(am,min(x[0] for x in a),max(x[0] for x in a),bm,min(x[0] for x in b),max(x[0] for x in b),bm/am,S.median(x[1] for x in a),S.median(x[1] for x in b),S.median(x[2] for x in a),S.median(x[2] for x in b)))
PY
