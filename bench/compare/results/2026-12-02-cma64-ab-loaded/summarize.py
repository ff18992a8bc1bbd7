# new/old per launch pair (same round, mode, binding), median (min-max) over pairs, of p50
# and p99; cohort medians beside Open MPI's mean (lat_us); placement from --sched.
import glob, os, re, statistics as st, sys
out = sys.argv[1]
d = {}
for path in glob.glob(os.path.join(out, "*.txt")):
    v, r = os.path.basename(path).split(".")[:2]
    var, bind, mode = (v.split("-") + [""])[:3] if not v.startswith("ompi") else ("ompi", "", v.split("-")[1])
    txt = open(path).read()
    for line in txt.splitlines():
        f = line.split()
        if var == "ompi" and len(f) >= 4 and f[0] == "bcast":
            d[(var, bind, mode, int(f[1]), r)] = (float(f[3]), None, float(f[3]))
        elif var != "ompi" and len(f) >= 12 and f[0].isdigit():
            d[(var, bind, mode, int(f[0]), r)] = (float(f[9]), float(f[10]), float(f[5]))
        m = re.match(r"# sched: broadcast (\d+) B .*ivcsw ([\d.]+) \| r1 .*ivcsw ([\d.]+)", line)
        if m and var != "ompi":
            d.setdefault(("sched", var, bind, mode, int(m.group(1))), []).append(float(m.group(2)))
def q(xs):
    return f"x{st.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})" if xs else "-"
sizes = sorted({k[3] for k in d if k[0] in ("old", "new", "ompi")})
for mode in ("b2b", "osu"):
    print(f"\n{mode}: new/old per pair (median, min-max), cohort p50/p99 medians, Open MPI mean\n")
    print("| size | bind | old p50 | new p50 | new/old p50 | old p99 | new p99 | new/old p99 | old mean | new mean | Open MPI mean | pairs |")
    print("|---:|---|---:|---:|---|---:|---:|---|---:|---:|---:|---:|")
    for z in sizes:
        for bind in ("none", "core"):
            rs = sorted({k[4] for k in d if k[:4] == ("old", bind, mode, z)} & {k[4] for k in d if k[:4] == ("new", bind, mode, z)})
            if not rs:
                continue
            o = [d[("old", bind, mode, z, r)] for r in rs]; n = [d[("new", bind, mode, z, r)] for r in rs]
            om = [v[0] for k, v in d.items() if k[0] == "ompi" and k[2] == mode and k[3] == z]
            print(f"| {z} | {bind} | {st.median(x[0] for x in o):.1f} | {st.median(x[0] for x in n):.1f} | {q([b[0]/a[0] for a, b in zip(o, n)])} | "
                  f"{st.median(x[1] for x in o):.1f} | {st.median(x[1] for x in n):.1f} | {q([b[1]/a[1] for a, b in zip(o, n)])} | "
                  f"{st.median(x[2] for x in o):.1f} | {st.median(x[2] for x in n):.1f} | {st.median(om) if om else float('nan'):.1f} | {len(rs)} |")
c2c = []
for path in glob.glob(os.path.join(out, "*.txt")):
    c2c += [int(x) for x in re.findall(r"# c2c (?:before|after): c2c \S+ \S+ (\d+)", open(path).read())]
if c2c:
    print(f"\nc2c over all launches: min {min(c2c)} median {st.median(c2c)} max {max(c2c)} ns ({sum(x < 250 for x in c2c)} of {len(c2c)} readings near)")
