import sys
def load(p): return [tuple(map(float,l.split())) for l in open(p)]
pre=sys.argv[1]; r0=load(pre+".0"); r1=load(pre+".1")
d=[b[1]-b[0] for b in r1]
import collections
h=collections.Counter(int(x//25)*25 for x in d)
for k in sorted(h): print(f"{k:5d} {h[k]:5d} "+"#"*(h[k]//10))
# sequence pattern: first 60 calls receiver times
print(" ".join(f"{x:.0f}" for x in d[:80]))
