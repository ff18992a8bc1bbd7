import glob,json,os,sys,statistics as S
res={}
for f in glob.glob(sys.argv[1]+"/*.json"):
    cfg,v,i=os.path.basename(f).split(".")[:3]
    try: d=json.load(open(f))
    except: continue
    for r in d["results"]:
        res.setdefault((cfg,r["size"]),{}).setdefault(v,[]).append((r["avg_us"],r["p50_us"],r["p99_us"]))
print("cfg size: avg_us min / p25 / median over launches, A -> B; p50 median; p99 median")
for k in sorted(res):
    a=sorted(x[0] for x in res[k].get("A",[])); b=sorted(x[0] for x in res[k].get("B",[]))
    if not a or not b: continue
    q=lambda l: l[len(l)//4]
    pa=S.median(x[1] for x in res[k]["A"]); pb=S.median(x[1] for x in res[k]["B"])
    ra=S.median(x[2] for x in res[k]["A"]); rb=S.median(x[2] for x in res[k]["B"])
    print(f"{k[0]} {k[1]:>6}: min {a[0]:.3f} -> {b[0]:.3f}  p25 {q(a):.3f} -> {q(b):.3f}  med {S.median(a):.2f} -> {S.median(b):.2f} | p50 {pa:.3f} -> {pb:.3f} | p99 {ra:.2f} -> {rb:.2f} ({len(a)}/{len(b)} launches)")
