#!/usr/bin/env python3
# tri_sum.py tri.txt: per variant median [min..max] of wall, root task-clock/sys, leaf per-call syscalls; pairs won vs A
import re, sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    m = re.match(r'(\w) r(\d+) \S+ wall=([\d.]+)', l)
    if not m: continue
    v, r, w = m.group(1), int(m.group(2)), float(m.group(3))
    parts = l.split('|')
    root = dict(re.findall(r'([\w:-]+)=([\d.]+)', parts[1])); leaf = dict(re.findall(r'([\w:-]+)=([\d.]+)', parts[2]))
    rows.setdefault(v, {})[r] = (w, float(root['task-clock']), float(root.get('sys', 0)), leaf)
def s(xs): return f'{st.median(xs):.2f} [{min(xs):.2f}..{max(xs):.2f}]'
for v in sorted(rows):
    d = rows[v]
    print(f'{v}: n={len(d)} wall us/call {s([x[0] for x in d.values()])}; root task-clock {s([x[1] for x in d.values()])}, root sys {s([x[2] for x in d.values()])}; leaf per call:',
          ', '.join(f'{k} {st.median([float(x[3].get(k, 0)) for x in d.values()]):.2f}' for k in ('recvfrom', 'readv', 'poll', 'sched_yield', 'sys_calls', 'task-clock')))
for v in sorted(rows):
    if v == 'A': continue
    rs = [r for r in rows[v] if r in rows['A']]
    print(f'{v}/A per round: median x{st.median([rows[v][r][0]/rows["A"][r][0] for r in rs]):.3f}, {v} faster in {sum(rows[v][r][0] < rows["A"][r][0] for r in rs)}/{len(rs)}')
