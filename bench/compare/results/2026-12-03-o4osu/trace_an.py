import sys, collections, statistics as S
d=sys.argv[1]; b=sys.argv[2] if len(sys.argv)>2 else '8'
R={}
for r in range(4):
    R[r]={}
    for l in open(f"{d}/r{r}_{b}.txt"):
        f=l.split(); R[r][int(f[0])]=(float(f[1]),float(f[2]),float(f[3]),int(f[4]),int(f[5]))
its=sorted(set.intersection(*[set(R[r]) for r in R]))
cat=collections.Counter(); tim=collections.defaultdict(list)
allmax=[]
for i in its:
    e=[R[r][i] for r in range(4)]
    durs=[(x[1]-x[0])*1e6 for x in e]
    mx=max(durs); allmax.append(mx)
    first=min(range(4),key=lambda r:e[r][0])
    rootcpu=e[0][3]
    mates=[r for r in range(1,4) if e[r][3]==rootcpu]
    # key: who left the barrier first; is it root, a reader on root's cpu, or other cpu
    k='root' if first==0 else ('mate' if e[first][3]==rootcpu else 'other')
    # root's start relative to first exit
    lag=(e[0][0]-e[first][0])*1e6
    cat[k]+=1; tim[k].append((mx,lag,durs))
print("iters",len(its),"mean of per-iter max dur %.2f p50 %.2f"%(S.mean(allmax),S.median(allmax)))
for r in range(4):
    ds=[(R[r][i][1]-R[r][i][0])*1e6 for i in its]
    print(" rank",r,"mean %.2f p50 %.2f p90 %.2f"%(S.mean(ds),S.median(ds),sorted(ds)[int(.9*len(ds))]))
for k in cat:
    v=tim[k]
    mxs=sorted(x[0] for x in v); lags=sorted(x[1] for x in v)
    print(k,cat[k],"max-dur p50 %.2f mean %.2f | root start lag p50 %.2f"%(mxs[len(mxs)//2],S.mean(mxs),lags[len(lags)//2]))
