# median over pairs of B/A p50 per size, with range; argv: rows files
import collections,statistics,sys
d=collections.defaultdict(lambda: collections.defaultdict(dict))
for f in sys.argv[1:]:
    for l in open(f):
        if not l.strip(): continue
        side,r,c,op,ip,sz,avg,p50,p99=l.split()
        d[(f,int(r))][int(sz)][side]=float(p50)
by=collections.defaultdict(list); raw=collections.defaultdict(lambda: collections.defaultdict(list))
for k,v in d.items():
    for sz,s in v.items():
        if 'A' in s and 'B' in s:
            by[sz].append(s['B']/s['A']); raw[sz]['A'].append(s['A']); raw[sz]['B'].append(s['B'])
for sz in sorted(by):
    r=sorted(by[sz])
    print("%6d KiB  B/A median x%.2f (%.2f-%.2f, %d pairs, %d of them < 1)  p50 us A median %.0f B median %.0f" %
          (sz>>10, statistics.median(r), r[0], r[-1], len(r), sum(x<1 for x in r),
           statistics.median(raw[sz]['A']), statistics.median(raw[sz]['B'])))
