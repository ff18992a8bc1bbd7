#!/usr/bin/env python3
# summarize.py ab.txt: per size, new/old per round of mean, p50, p99 (cohort-perf --percentiles rows)
import re, statistics as S, sys
d={}
for b in open(sys.argv[1]).read().split('## round ')[1:]:
    r,v=b.split('\n')[0].split()[:2]
    for l in b.split('\n')[1:]:
        x=l.split()
        if x and x[0].isdigit() and len(x)>=12: d.setdefault(int(x[0]),{}).setdefault(r,{})[v]=(float(x[5]),float(x[9]),float(x[10]))
for sz in sorted(d):
    rs=[r for r in d[sz] if len(d[sz][r])==2]
    out=[]
    for i,n in ((0,'mean'),(1,'p50'),(2,'p99')):
        rat=[d[sz][r]['new'][i]/d[sz][r]['old'][i] for r in rs]
        out.append(f"{n} x{S.median(rat):.2f} [{min(rat):.2f}..{max(rat):.2f}] {sum(x<1 for x in rat)}/{len(rat)}")
    print(f"{sz:>9} new/old: "+"  ".join(out)+f"  medians old {S.median([d[sz][r]['old'][0] for r in rs]):.1f} new {S.median([d[sz][r]['new'][0] for r in rs]):.1f} us")
