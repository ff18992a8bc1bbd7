import sys,collections,statistics as st
d=collections.defaultdict(lambda: collections.defaultdict(dict))
for l in open(sys.argv[1]):
    side,r,c,op,size,us=l.split(); d[(op,int(size))][int(r)][side]=(float(us),int(c))
for k in sorted(d):
    rows=d[k]; rat=[v['B'][0]/v['A'][0] for v in rows.values() if 'A' in v and 'B' in v]
    a=[v['A'][0] for v in rows.values() if 'A' in v]; b=[v['B'][0] for v in rows.values() if 'B' in v]
    print(f"{k[0]:>10} {k[1]:>4}  A {min(a):.3f}-{max(a):.3f}  B {min(b):.3f}-{max(b):.3f}  B/A median {st.median(rat):.2f} ({min(rat):.2f}-{max(rat):.2f}) pairs {len(rat)}")
print('c2c', sorted(set(v[s][1] for k in d for v in d[k].values() for s in v)))
