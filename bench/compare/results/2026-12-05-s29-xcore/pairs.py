import collections,sys
rows=[l.split() for l in open(sys.argv[1]) if l.strip()]
d=collections.defaultdict(dict)
for side,r,c,op,ip,sz,avg,p50,p99 in rows:
    d[(int(r),op)].setdefault(side,[int(c),{}])[1][(int(ip),int(sz))]=float(p50)
a,b=sys.argv[2],sys.argv[3]
for k in sorted(d):
    if a not in d[k] or b not in d[k]: continue
    ca,A=d[k][a]; cb,B=d[k][b]
    out=" ".join("%s%d:%.0f/%.0f=x%.2f"%('ip' if ip else 'oop',sz>>10,A[(ip,sz)],B[(ip,sz)],A[(ip,sz)]/B[(ip,sz)]) for (ip,sz) in sorted(A) if (ip,sz) in B)
    print(k, "c2c %s %d %s %d"%(a,ca,b,cb), out)
