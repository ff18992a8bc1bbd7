# pairs.py RAWDIR: per op and size, over the launch pairs i (A = main, B = lane2):
# median of A and B step p50 / p99, median B/A of p50, and how many pairs B was
# faster / slower / equal at p50 (and lower / higher at p99).
import glob, json, os, statistics as S, sys
res = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    t, v, i = os.path.basename(f).split(".")[:3]
    for r in json.load(open(f))["results"]:
        res.setdefault((r["op"], r["size"]), {}).setdefault(v, {})[i] = (r["step_p50_us"], r["step_p99_us"])
print("op size pairs | p50 A -> B (median) | B/A per-pair median | p50 B faster/slower/equal | p99 A -> B | p99 B lower/higher/equal")
for k in sorted(res):
    a, b = res[k]["A"], res[k]["B"]
    ps = sorted(set(a) & set(b))
    cnt = lambda j: (sum(b[i][j] < a[i][j] for i in ps), sum(b[i][j] > a[i][j] for i in ps), sum(b[i][j] == a[i][j] for i in ps))
    r = S.median(b[i][0] / a[i][0] for i in ps)
    print(f"{k[0]:10s} {k[1]:3d} {len(ps):2d} | {S.median(a[i][0] for i in ps):.3f} -> {S.median(b[i][0] for i in ps):.3f} | x{r:.3f} | "
          f"{'/'.join(map(str, cnt(0)))} | {S.median(a[i][1] for i in ps):.2f} -> {S.median(b[i][1] for i in ps):.2f} | {'/'.join(map(str, cnt(1)))}")
