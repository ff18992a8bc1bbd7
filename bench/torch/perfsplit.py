"""Splits a perf record of split.py's calling thread by mode (docs/pytorch.md,
"Cost"): split.py with PERF_OUT=FILE writes FILE.marks (each block's mode
and CLOCK_MONOTONIC span; perf records with -k CLOCK_MONOTONIC), and this
prints, per mode, the samples per call (cpu-clock at 20 kHz: 50 us each)
by DSO and by symbol, and the difference of each mode from the first, so
that paired blocks of one program say where a mode's extra CPU goes.
  python3 bench/torch/perfsplit.py FILE [CALLS_PER_BLOCK (200)] [TOP (25)]
"""
import bisect
import collections
import subprocess
import sys

path = sys.argv[1]
blk = int(sys.argv[2]) if len(sys.argv) > 2 else 200
top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
marks = []
for line in open(path + ".marks"):
    m, a, b = line.split()
    marks.append((int(a), int(b), m))
marks.sort()
starts = [a for a, _, _ in marks]
calls = collections.Counter()
for _, _, m in marks:
    calls[m] += blk
order = list(dict.fromkeys(m for _, _, m in marks))
txt = subprocess.run(["perf", "script", "-i", path, "-F", "time,ip,sym,dso", "--ns", "-G"],
                     capture_output=True, text=True, check=True).stdout
by_dso = {m: collections.Counter() for m in order}
by_sym = {m: collections.Counter() for m in order}
total = collections.Counter()
cur = None
for line in txt.splitlines():
    s = line.strip()
    if not s:
        cur = None
        continue
    if s[0].isdigit() and s.split()[0].endswith(":"):  # a sample's header: time:
        t = int(round(float(s.split()[0][:-1]) * 1e9))
        i = bisect.bisect_right(starts, t) - 1
        cur = None
        if i >= 0 and t <= marks[i][1]:
            cur = marks[i][2]
            total[cur] += 1
            rest = s.split(None, 1)[1] if len(s.split(None, 1)) > 1 else ""
            f = rest.split(None, 1)  # ip sym (dso)
            sym = f[1].rsplit(" (", 1) if len(f) > 1 else ["?", "?)"]
            dso = sym[1].rstrip(")").rsplit("/", 1)[-1] if len(sym) > 1 else "?"
            name = sym[0].split("+0x")[0]
            by_dso[cur][dso] += 1
            by_sym[cur][(name, dso)] += 1
        continue
us = 1e6 / 20000  # per sample
base = order[0]
print(f"samples of the calling thread per mode (cpu-clock, {us:.0f} us each); per call in us")
for m in order:
    print(f"  {m:8} calls {calls[m]:6} samples {total[m]:6} = {total[m] * us / calls[m]:7.1f} us/call")
for title, tab in (("by DSO", by_dso), ("by symbol", by_sym)):
    keys = set()
    for m in order:
        keys |= set(tab[m])
    pc = lambda m, k: tab[m][k] * us / calls[m]
    rows = sorted(keys, key=lambda k: -max(abs(pc(m, k) - pc(base, k)) for m in order))
    print(f"{title}: us/call per mode, and each mode minus {base}")
    for k in rows[:top]:
        name = k if isinstance(k, str) else f"{k[0][:48]} ({k[1][:24]})"
        print(f"  {name:76} " + " ".join(f"{pc(m, k):7.2f}" for m in order) + "  "
              + " ".join(f"{pc(m, k) - pc(base, k):+7.2f}" for m in order[1:]))
