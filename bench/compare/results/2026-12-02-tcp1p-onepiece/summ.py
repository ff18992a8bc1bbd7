#!/usr/bin/env python3
# summ.py FILE BASE: per size and variant, ratio to BASE per round of mean/p50/p99: median [min..max] wins
import statistics as S, sys
d={}
base=sys.argv[2]
for b in open(sys.argv[1]).read().split('## round ')[1:]:
    r,v=b.split('\n')[0].split()[:2]
    for l in b.split('\n')[1:]:
        x=l.split()
        if x and x[0].isdigit() and len(x)>=12: d.setdefault(int(x[0]),{}).setdefault(r,{})[v]=(float(x[5]),float(x[9]),float(x[10]))
for sz in sorted(d):
    vs=sorted({v for r in d[sz] for v in d[sz][r]})
    print(f"{sz}: {base} medians mean/p50/p99 " + " ".join(f"{S.median([d[sz][r][base][i] for r in d[sz] if base in d[sz][r]]):.0f}" for i in range(3)))
    for v in vs:
        if v==base: continue
        rs=[r for r in d[sz] if v in d[sz][r] and base in d[sz][r]]
        out=[]
        for i,n in ((0,'mean'),(1,'p50'),(2,'p99')):
            rat=[d[sz][r][v][i]/d[sz][r][base][i] for r in rs]
            out.append(f"{n} x{S.median(rat):.2f} [{min(rat):.2f}..{max(rat):.2f}] {sum(x<1 for x in rat)}/{len(rat)}")
        print(f"   {v:>10}/{base}: "+"  ".join(out))
