import sys, collections
# mode round c2c op ip size p50 p99 ; class c2c: F <90, M 90-300, S >=300
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<8: continue
    m,r,c,op,ip,sz,p50,p99=f
    c=int(c); cl='F' if c<90 else ('M' if c<300 else 'S')
    d[(op,int(ip),int(sz),cl,m)].append(float(p50))
keys=sorted({k[:4] for k in d})
print("op ip size state  off  auto  on   (medians of p50, n)")
import statistics as st
for k in keys:
    row=[]
    for m in ('off','auto','on'):
        v=d.get(k+(m,),[])
        row.append("%8.1f(%d)"%(st.median(v),len(v)) if v else "      -   ")
    print("%-14s %d %8d %s %s"%(k[0],k[1],k[2],k[3]," ".join(row)))
