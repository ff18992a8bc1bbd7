import sys,collections,statistics as st
# ab.sh's lines: per (op, in place, size) the launches' p50 on each side and the paired B/A
d=collections.defaultdict(lambda: collections.defaultdict(dict))
for l in open(sys.argv[1]):
    side,r,c,op,ip,size,avg,p50,p99=l.split()
    d[(op,int(ip),int(size))][int(r)][side]=(float(avg),float(p50),float(p99),int(c))
print("op             form  size      A p50 (launches)      B p50 (launches)     B/A p50 median (range)  B/A avg  pairs")
for k in sorted(d):
    rows=d[k]; pr=[v for v in rows.values() if 'A' in v and 'B' in v]
    rat=[v['B'][1]/v['A'][1] for v in pr]; ravg=[v['B'][0]/v['A'][0] for v in pr]
    a=[v['A'][1] for v in rows.values() if 'A' in v]; b=[v['B'][1] for v in rows.values() if 'B' in v]
    print(f"{k[0]:<14} {'in ' if k[1] else 'out'}  {k[2]:>8}  {st.median(a):9.2f} ({min(a):.2f}-{max(a):.2f})  {st.median(b):9.2f} ({min(b):.2f}-{max(b):.2f})  x{st.median(rat):.2f} ({min(rat):.2f}-{max(rat):.2f})  x{st.median(ravg):.2f}  {len(rat)}")
print('c2c ns per launch', sorted(v[s][3] for k in list(d)[:1] for v in d[k].values() for s in v))
