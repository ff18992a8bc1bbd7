#!/usr/bin/env python3
# stsum.py FILE CALLS: from `strace -f -e trace=...` output, per syscall: calls per collective
# call, calls that moved > 1000 bytes, their mean and max size (KiB). Handles <... resumed> lines.
import re, sys
calls = float(sys.argv[2])
st = {}
for l in open(sys.argv[1]):
    m = re.search(r'(?:<\.\.\. )?(sendmsg|recvfrom|writev|readv|poll|epoll_wait|sched_yield)(?:\(| resumed>)', l)
    if not m or 'unfinished' in l:
        continue
    k = m.group(1)
    r = re.search(r'= (-?\d+)', l)
    n = int(r.group(1)) if r else 0
    s = st.setdefault(k, [0, 0, 0, 0])
    s[0] += 1
    if n > 1000:
        s[1] += 1; s[2] += n; s[3] = max(s[3], n)
for k, (c, b, tot, mx) in sorted(st.items()):
    print(f"  {k:12s} {c / calls:7.2f}/call  >1000 B: {b / calls:6.2f}/call  mean {tot / max(b, 1) / 1024:7.0f} KiB  max {mx / 1024:6.0f} KiB")
