#!/usr/bin/env python3
# one.py FILE N: per-call counts of one run (setup not cancelled)
import sys, importlib.util
spec = importlib.util.spec_from_file_location('per', sys.argv[0].replace('one.py', 'per.py'))
import re
def rd(f):
    d = {}
    for l in open(f):
        m = re.match(r'\s*([\d,.]+)\s+(msec\s+)?(\S+)', l)
        if m and not l.strip().startswith('#'):
            k=m.group(3).replace('syscalls:sys_enter_', '').replace('raw_syscalls:sys_enter', 'all_sys')
            d[k] = float(m.group(1).replace(',', '')) * (1000 if m.group(2) else 1)
        m = re.match(r'\s*([\d.]+) seconds (user|sys|time elapsed)', l)
        if m: d[m.group(2).split()[0]] = float(m.group(1)) * 1e6
    return d
n = int(sys.argv[2])
for f in sys.argv[3:] if len(sys.argv) > 3 else [sys.argv[1] + '.0', sys.argv[1] + '.1']:
    d = rd(f)
    print(f, ' '.join(f'{k}={v/n:.3f}' for k, v in d.items() if v and k != 'cpu-migrations' and k != 'time'), '(task-clock, user, sys in us per call)')
