import glob, json, os, statistics as S, sys
out, names = sys.argv[1], sys.argv[2:]
cell = {}
for f in glob.glob(os.path.join(out, "*.json")):
    v, np_, mode, r = os.path.basename(f).split(".")[:4]
    cs = [int(x) for x in open(f[:-5] + ".c2c").read().split() if x.isdigit()]
    st = "near" if max(cs) < 200 else "far"
    for row in json.load(open(f))["results"]:
        k = (int(np_), mode, row["op"], row["size"], st)
        cell.setdefault(k, {}).setdefault(v, []).append((row["p50_us"], row["step_p50_us"]))
print("| ranks | mode | op | bytes | state | launches | lead p50 " + " / ".join(names) + " | lead ratio | group (step) p50 | group ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k in sorted(cell):
    d = cell[k]
    if not all(n in d for n in names):
        continue
    lead = [S.median(a[0] for a in d[n]) for n in names]
    grp = [S.median(a[1] for a in d[n]) for n in names]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {'/'.join(str(len(d[n])) for n in names)} | "
          f"{' / '.join(f'{x:.1f}' for x in lead)} | x{lead[1]/lead[0]:.2f} | {' / '.join(f'{x:.1f}' for x in grp)} | x{grp[1]/grp[0]:.2f} |")
