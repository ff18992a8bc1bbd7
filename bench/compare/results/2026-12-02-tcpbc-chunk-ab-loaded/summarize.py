#!/usr/bin/env python3
# summarize.py ab.txt: paired per round new/old of wall (cohort-perf's time column), root and leaf CPU per call
import re, statistics as S, sys
txt=open(sys.argv[1] if len(sys.argv)>1 else 'ab.txt').read().split('## round ')[1:]
d={}
for blk in txt:
    hdr=blk.split('\n')[0].split(); r,v=int(hdr[0]),hdr[1]
    m=re.search(r'^\s+\d+\s+\d+\s+float\s+none\s+0\s+([\d.]+)', blk, re.M)
    c0=re.search(r'rank0 per call:.*cpu_us=([\d.]+)', blk); c1=re.search(r'rank1 per call:.*cpu_us=([\d.]+)', blk)
    if m and c0 and c1: d.setdefault(r,{})[v]=(float(m.group(1)),float(c0.group(1)),float(c1.group(1)))
rs=[r for r in d if 'old' in d[r] and 'new' in d[r]]
for k,name in ((0,'wall us (mean/call)'),(1,'root cpu us/call'),(2,'leaf cpu us/call')):
    rat=[d[r]['new'][k]/d[r]['old'][k] for r in rs]
    print(f"{name:20} old median {S.median([d[r]['old'][k] for r in rs]):.3f}  new median {S.median([d[r]['new'][k] for r in rs]):.3f}  new/old per round x{S.median(rat):.3f} [{min(rat):.2f}..{max(rat):.2f}]  new wins {sum(x<1 for x in rat)}/{len(rat)}")
