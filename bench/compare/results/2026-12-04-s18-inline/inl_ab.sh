#!/usr/bin/env bash
# usage: inl_ab.sh OUT ROUNDS OPS SIZES [extra cohort-perf args]
OUT=$1 R=$2 OPS=$3 SIZES=$4; shift 4
mkdir -p $OUT
A=${A:-/tmp/bA/tools/cohort-perf/cohort-perf} B=${B:-$(dirname "$0")/../../../../build-o3/tools/cohort-perf/cohort-perf}
for r in $(seq 1 $R); do
  for v in A B; do
    if [ $((r % 2)) = 0 ]; then v=$([ $v = A ] && echo B || echo A); fi
    P=$A; [ $v = B ] && P=$B
    $P --np 2 --bind auto --coll "$OPS" --sizes "$SIZES" --time 0.2 --in-place no --percentiles "$@" > $OUT/$v.$r.txt 2>&1
  done
done
python3 - $OUT <<'P'
import glob,re,sys,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*.txt')):
    v=f.split('/')[-1].split('.')[0]; op=None
    for l in open(f):
        m=re.match(r"# Collective: (\w+)",l)
        if m: op=m.group(1)
        x=l.split()
        if op and x and x[0].isdigit() and len(x)>=12: d[(op,int(x[0]),v)].append(float(x[-3]))
keys=sorted({(k[0],k[1]) for k in d})
for op,b in keys:
    a=sorted(d[(op,b,'A')]); bb=sorted(d[(op,b,'B')])
    med=lambda z: z[len(z)//2] if z else float('nan')
    print(f"{op:12s} {b:6d}  A {' '.join('%.3f'%x for x in a)}  B {' '.join('%.3f'%x for x in bb)}  B/A {med(bb)/med(a):.2f}")
P
