#!/usr/bin/env python3
"""summarize.py OUT_DIR: median over repetitions of lat (us) and busbw per
(library, ranks, coll, bytes) from shm_vs_mpi.sh output; prints markdown."""
import collections, glob, os, re, statistics, sys

d = sys.argv[1]
rows = collections.defaultdict(list)  # (lib, n, coll, bytes) -> [(lat, busbw, p50, p99)]
for f in glob.glob(os.path.join(d, "*.txt")):
    lib, n = re.match(r"(\w+)_n(\d+)_r\d+\.txt", os.path.basename(f)).groups()
    for line in open(f):
        if line.startswith("#") or line.startswith("coll"):
            continue
        p = line.split()
        if len(p) < 8:
            continue
        if lib == "cohort":  # coll bytes ranks lat min p50 p99 max algbw busbw iters check
            rows[(lib, int(n), p[0], int(p[1]))].append(
                (float(p[3]), float(p[9]), float(p[5]), float(p[6])))
        else:  # MPI harness: coll bytes ranks lat min algbw busbw rep check
            rows[(lib, int(n), p[0], int(p[1]))].append((float(p[3]), float(p[6]), None, None))

def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None

keys = sorted({(n, c, b) for (_, n, c, b) in rows})
cur = None
for n, c, b in keys:
    if (n, c) != cur:
        cur = (n, c)
        print(f"\n### {c}, {n} ranks (median of runs; lat us / busbw GB/s; cohort p50/p99 us)\n")
        print("| bytes | cohort lat | cohort busbw | cohort p50 | cohort p99 | Open MPI lat | Open MPI busbw | MPICH lat | MPICH busbw | cohort / best peer lat |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    co = rows.get(("cohort", n, c, b), [])
    om = rows.get(("ompi", n, c, b), [])
    cl, cb = med([x[0] for x in co]), med([x[1] for x in co])
    p50, p99 = med([x[2] for x in co]), med([x[3] for x in co])
    ol, ob = med([x[0] for x in om]), med([x[1] for x in om])
    mp = rows.get(("mpich", n, c, b), [])
    ml, mb = med([x[0] for x in mp]), med([x[1] for x in mp])
    f = lambda x, k=".2f": "-" if x is None else format(x, k)
    best = min([x for x in (ol, ml) if x], default=None)
    ratio = f(cl / best) if cl and best else "-"
    print(f"| {b} | {f(cl)} | {f(cb)} | {f(p50)} | {f(p99)} | {f(ol)} | {f(ob)} | {f(ml)} | {f(mb)} | {ratio} |")
