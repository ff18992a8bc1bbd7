#!/bin/bash
# alternate base/new builds; args: np list, sizes, rounds, extra flags
S=${S:-8,1024,16384,65536,1048576}
for i in $(seq 1 ${N:-5}); do
  for np in ${NP:-2 4}; do
    for v in base new; do
      [ $v = base ] && P=/tmp/bx/build-o3/tools/cohort-perf/cohort-perf || P=/work/main/build-o3/tools/cohort-perf/cohort-perf
      timeout 300 $P --np $np --transport tcp --coll ${COLL:-reduce} --sizes $S --time 0.2 --in-place no $EXTRA --json-out $v.$np.$i.json > $v.$np.$i.txt 2>&1 || echo "fail $v $np $i"
    done
  done
done
python3 - <<'PY'
import glob,json,statistics as S,os
d={}
for f in glob.glob('*.json'):
    v,np,i=os.path.basename(f).split('.')[:3]
    for r in json.load(open(f))['results']:
        d.setdefault((int(np),r['size']),{}).setdefault(v,{})[int(i)]=r['avg_us']
for k in sorted(d):
    b=d[k].get('base',{}); n=d[k].get('new',{})
    pr=[n[i]/b[i] for i in b if i in n]
    print(k, 'base %.2f new %.2f  ratio median %.3f  pairs<1: %d/%d' % (S.median(b.values()), S.median(n.values()), S.median(pr), sum(x<1 for x in pr), len(pr)))
PY
