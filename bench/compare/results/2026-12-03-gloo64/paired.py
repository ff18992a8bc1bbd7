import glob, json, os, sys, statistics as S
out = sys.argv[1]; base = sys.argv[2] if len(sys.argv) > 2 else "flat"
d = {}
for f in glob.glob(f"{out}/*.json"):
    a, np_, i = os.path.basename(f).split(".")[:3]
    for r in json.load(open(f))["results"]:
        d[(a, r["size"], int(i))] = (r["avg_us"], r.get("step_p99_us"))
for f in glob.glob(f"{out}/gloo.*.txt"):
    i = int(os.path.basename(f).split(".")[2])
    for line in open(f):
        x = line.split()
        if len(x) >= 9 and x[0] == "broadcast" and x[1].isdigit():
            d[("gloo", int(x[1]), i)] = (float(x[3]), None)
algos = sorted({k[0] for k in d}); sizes = sorted({k[1] for k in d}); rounds = sorted({k[2] for k in d})
for s in sizes:
    for a in algos:
        if a == base: continue
        rs = [d[(a, s, i)][0] / d[(base, s, i)][0] for i in rounds if (a, s, i) in d and (base, s, i) in d]
        if not rs: continue
        wins = sum(r < 1 for r in rs)
        p50 = S.median([d[(a, s, i)][0] for i in rounds if (a, s, i) in d])
        p99s = [d[(a, s, i)][1] for i in rounds if (a, s, i) in d and d[(a, s, i)][1]]
        print(f"{s:>9} {a:>12}/{base}: {S.median(rs):.2f} [{min(rs):.2f}..{max(rs):.2f}] wins {wins}/{len(rs)}  median {p50/1000:.1f} ms  p99(med) {S.median(p99s)/1000 if p99s else float('nan'):.1f} ms")
