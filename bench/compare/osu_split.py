#!/usr/bin/env python3
"""osu_split.py OUT [h] - lines up osu_split.c stamps of ranks 0 (root) and 1; h: histogram of root broadcast start -> receiver done (0.25 us bins, those holding > 1 %)."""
import sys, statistics as st
pre=sys.argv[1]
r0=[list(map(int,l.split())) for l in open(pre+'.0')]
r1=[list(map(int,l.split())) for l in open(pre+'.1')]
def q(x,p): x=sorted(x); return x[int(p*(len(x)-1))]
bc0=[c-b for a,b,c in r0]; bc1=[c-b for a,b,c in r1]
skew=[r0[i][1]-r1[i][1] for i in range(len(r0))]  # root barrier exit - leaf barrier exit
bar0=[b-a for a,b,c in r0]; bar1=[b-a for a,b,c in r1]
arr=[r0[i][0]-r1[i][0] for i in range(len(r0))]  # root arrive - leaf arrive
dat=[r1[i][2]-r0[i][1] for i in range(len(r0))]  # leaf done - root start bcast
per=[r0[i+1][0]-r0[i][0] for i in range(len(r0)-1)]
for n,x in [('iteration (root)',per),('root bc',bc0),('leaf bc',bc1),('skew rootexit-leafexit',skew),('arrive root-leaf',arr),('root bar',bar0),('leaf bar',bar1),('leaf done - root bc start',dat)]:
  print(f"{n:28s} mean {st.mean(x)/1000:7.2f} p10 {q(x,.1)/1000:7.2f} p50 {q(x,.5)/1000:7.2f} p90 {q(x,.9)/1000:7.2f} us")
import collections
if len(sys.argv)>2:
  h=collections.Counter(min(int(x/250),40) for x in dat)
  print(' dat hist (0.25us bins):',' '.join(f"{k*0.25:.2f}:{h[k]}" for k in sorted(h) if h[k]>len(dat)//100))
