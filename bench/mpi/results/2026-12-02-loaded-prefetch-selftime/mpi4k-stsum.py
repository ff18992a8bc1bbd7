import sys, collections, statistics as st
rows=collections.defaultdict(lambda: collections.defaultdict(dict))
for l in open(sys.argv[1]):
    f=l.split()
    impl,op,sz,ab,r,rank=f[0],f[1],int(f[2]),f[3],int(f[4]),int(f[6])
    v=dict(zip(f[7::2],map(float,f[8::2])))
    rows[(impl,op,sz)][(r,rank)][ab]=v
print("cell | A p10/p50/p99 | B p10/p50/p99 (medians over reps x ranks, ns) | B-A p50 per pair: median [min,max]")
for k in sorted(rows):
    pr=[x for x in rows[k].values() if 'A' in x and 'B' in x]
    m=lambda ab,q: st.median(x[ab][q] for x in pr)
    d=[x['B']['p50']-x['A']['p50'] for x in pr]
    print(f"{k[0]:8} {k[1]:9} {k[2]:>6} | {m('A','p10'):5.0f} {m('A','p50'):5.0f} {m('A','p99'):6.0f} | {m('B','p10'):5.0f} {m('B','p50'):5.0f} {m('B','p99'):6.0f} | {st.median(d):+5.0f} [{min(d):+.0f}, {max(d):+.0f}] n={len(pr)}")
