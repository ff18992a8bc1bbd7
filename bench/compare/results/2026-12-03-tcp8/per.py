#!/usr/bin/env python3
# per.py TAG_SMALL N_SMALL TAG_BIG N_BIG: per-call counts from two iteration counts (setup cancels)
import re, sys
def rd(f):
    d = {}
    for l in open(f):
        m = re.match(r'\s*([\d,.]+)\s+(msec\s+)?(\S+)', l)
        if m and not l.strip().startswith('#'):
            v = float(m.group(1).replace(',', ''))
            k = m.group(3).replace('syscalls:sys_enter_', '').replace('raw_syscalls:sys_enter', 'syscalls_all')
            d[k] = v
        m = re.match(r'\s*([\d.]+) seconds (user|sys)', l)
        if m: d[m.group(2) + '_ms'] = float(m.group(1)) * 1000
    return d
a, na, b, nb = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
for r in (0, 1):
    x, y = rd(f'{a}.{r}'), rd(f'{b}.{r}')
    out = []
    for k in y:
        if k in x:
            v = (y[k] - x[k]) / (nb - na)
            out.append(f'{k}={v*1000:.2f}us' if k.endswith('ms') or k == 'task-clock' else f'{k}={v:.3f}')
    print(f'{b} rank{r} per call:', ' '.join(out))
