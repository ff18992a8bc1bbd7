# rows "variant round op size p50 p99"; argv: file base; ratio of each variant to base per (op,size)
import collections, statistics, sys
rows = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    v, r, op, sz, p50, p99 = l.split()
    rows[(op, int(sz), r)][v] = float(p50)
base = sys.argv[2]
out = collections.defaultdict(list); med = collections.defaultdict(list)
for (op, sz, r), d in rows.items():
    for v, x in d.items():
        med[(op, sz, v)].append(x)
        if v != base and base in d:
            out[(op, sz, v)].append(x / d[base])
for k in sorted(out):
    rr = sorted(out[k]); op, sz, v = k
    print("%-15s %9d %-6s x%.3f (%.2f-%.2f) %d/%d slower  p50 %s %.2f / %s %.2f" % (op, sz, v, statistics.median(rr), rr[0], rr[-1],
          sum(x > 1 for x in rr), len(rr), v, statistics.median(med[k]), base, statistics.median(med[(op, sz, base)])))
