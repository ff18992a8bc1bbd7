import re,collections,statistics as st,sys
d=collections.defaultdict(lambda: collections.defaultdict(dict))
for l in open(sys.argv[1]):
    f=l.split(); v=f[0]; p=int(f[1])
    m=re.search(r'p50 ([\d.]+) .*copy ns min (\d+) p10 (\d+) p50 (\d+).*between copies ns min (\d+) p10 (\d+) p50 (\d+)',l)
    if not m: print('bad',l); continue
    for k,x in zip(['root_p50','copy_min','copy_p10','copy_p50','gap_min','gap_p10','gap_p50'],m.groups()): d[k][v][p]=float(x)/(1 if k=='root_p50' else 1000)
def q(xs,k): xs=sorted(xs); return xs[min(len(xs)-1,k*len(xs)//4)]
for k in d:
    ps=sorted(set(d[k]['A'])&set(d[k]['B'])); ds=[d[k]['B'][p]-d[k]['A'][p] for p in ps]
    print(f"{k:9} A {st.median(d[k]['A'].values()):7.2f} B {st.median(d[k]['B'].values()):7.2f} B-A median {st.median(ds):+6.2f} [{q(ds,1):+6.2f},{q(ds,3):+6.2f}] B>A {sum(x>0 for x in ds)}/{len(ds)}")
