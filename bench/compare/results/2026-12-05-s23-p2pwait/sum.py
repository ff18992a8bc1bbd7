import sys,collections,statistics as st
d=collections.defaultdict(list); builds=[]
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<5: continue
    r,np,pl,b=f[:4]; vals=f[4:]
    if b not in builds: builds.append(b)
    for i in range(0,len(vals)-1,2):
        d[(np,pl,int(vals[i]),b)].append(float(vals[i+1]))
keys=sorted({k[:3] for k in d}, key=lambda k:(k[0],k[1],k[2]))
print("case size  " + "  ".join(f"{b:>18}" for b in builds) + "   (median (min-max) of launches, us one way)")
for k in keys:
    row=[]
    for b in builds:
        v=d.get(k+(b,),[])
        row.append(f"{st.median(v):6.2f} ({min(v):.2f}-{max(v):.2f})" if v else " "*18)
    print(f"{k[0]} {k[1]:5} {k[2]:6}  "+"  ".join(f"{x:>18}" for x in row))
