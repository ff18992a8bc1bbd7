import sys
def load(p): return [tuple(map(float,l.split())) for l in open(p)]
pre=sys.argv[1]
r0=load(pre+".0"); r1=load(pre+".1")
d=[max(a[1]-a[0],b[1]-b[0]) for a,b in zip(r0,r1)]
s=sorted(d); n=len(s)
tot=(max(r0[-1][1],r1[-1][1])-min(r0[0][0],r1[0][0]))/n
print(f"{pre}: per-iter {tot:.1f} p50 {s[n//2]:.1f} p90 {s[n*9//10]:.1f} p99 {s[n*99//100]:.1f} max {s[-1]:.1f} mean-of-max {sum(d)/n:.1f}")
for nm,r in (("r0",r0),("r1",r1)):
  x=sorted(b-a for a,b in r); print(f"  {nm} p50 {x[n//2]:.1f} p99 {x[n*99//100]:.1f}")
