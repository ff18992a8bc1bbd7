import collections, statistics, sys
rows = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    v, r, op, sz, p50, p99 = l.split()
    rows[(op, int(sz), r)][v] = (float(p50), float(p99))
base = sys.argv[2]
out = collections.defaultdict(list); med = collections.defaultdict(list); m99 = collections.defaultdict(list)
for (op, sz, r), d in rows.items():
    for v, x in d.items():
        med[(op, sz, v)].append(x[0]); m99[(op, sz, v)].append(x[1])
        if v != base and base in d:
            out[(op, sz, v)].append(x[0] / d[base][0])
for k in sorted(out):
    rr = sorted(out[k]); op, sz, v = k
    print("%-10s %6d %-4s x%.3f (%.2f-%.2f) %d/%d slower  p50 %.2f / %.2f  p99 %.2f / %.2f" % (op, sz, v, statistics.median(rr), rr[0], rr[-1],
          sum(x > 1 for x in rr), len(rr), statistics.median(med[k]), statistics.median(med[(op, sz, base)]), statistics.median(m99[k]), statistics.median(m99[(op, sz, base)])))
