import sys, subprocess, glob, re, os
# an.py TAG N1 N2 : per call (N2-N1) on-off per rank
tag, n1, n2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(d, incl):
    files = sorted(glob.glob(d + "/cg.*"), key=lambda f: int(f.split('.')[-1]))
    ranks = files[-2:]
    res = []
    for f in ranks:
        out = subprocess.run(["callgrind_annotate", "--inclusive=" + ("yes" if incl else "no"), "--threshold=100", "--auto=no", f],
                             capture_output=True, text=True).stdout
        fn = {}; tot = 0
        for line in out.splitlines():
            m = re.match(r"\s*([\d,]+) (?:\([^)]*\))\s+(\S.*)$", line)
            if not m: continue
            v = int(m.group(1).replace(',', '')); name = m.group(2)
            if name.startswith("PROGRAM TOTALS"): tot = v; continue
            name = re.sub(r" \[.*\]$", "", name)
            name = re.sub(r"^.*/(src|tools|string|stdlib)/", r"\1/", name)
            fn[name] = fn.get(name, 0) + v
        res.append((tot, fn))
    return res
incl = os.environ.get("INCL") == "1"
D = {}
for mode in ("on", "off"):
    a = load(f"/tmp/cbig_cg/{tag}.{mode}.{n1}", incl); b = load(f"/tmp/cbig_cg/{tag}.{mode}.{n2}", incl)
    D[mode] = [((b[r][0]-a[r][0])/(n2-n1), {k: (b[r][1].get(k,0)-a[r][1].get(k,0))/(n2-n1) for k in set(a[r][1])|set(b[r][1])}) for r in range(2)]
print(f"== {tag}: per call, (N={n2}) - (N={n1}), {'inclusive' if incl else 'exclusive'}")
for r in range(2):
    on, off = D["on"][r], D["off"][r]
    W = re.compile(r"wait_loop|clock_gettime|coh_now_ns|sched_yield|ar_poll_fn|sched_getcpu|syscall|futex")
    nw = [x[0] - sum(v for k, v in x[1].items() if W.search(k)) for x in (on, off)]
    lib = [sum(v for k, v in x[1].items() if k.startswith("src/") and not W.search(k)) for x in (on, off)]
    mm = [sum(v for k, v in x[1].items() if "memmove" in k or "memcpy" in k) for x in (on, off)]
    print(f"rank {r}: libcohort without waits: on {lib[0]:.1f} off {lib[1]:.1f} diff {lib[0]-lib[1]:+.1f}; libc memcpy on {mm[0]:.1f} off {mm[1]:.1f}")
    print(f"rank {r}: total on {on[0]:.1f} off {off[0]:.1f} diff {on[0]-off[0]:+.1f}; without waits on {nw[0]:.1f} off {nw[1]:.1f} diff {nw[0]-nw[1]:+.1f}")
    keys = set(on[1]) | set(off[1])
    rows = sorted(keys, key=lambda k: -abs(on[1].get(k,0)-off[1].get(k,0)))
    for k in rows[:int(os.environ.get("TOP","14"))]:
        a, b = on[1].get(k,0), off[1].get(k,0)
        if abs(a-b) < 0.5: break
        print(f"   {a:12.1f} {b:12.1f} {a-b:+10.1f}  {k}")
