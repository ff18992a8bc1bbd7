import sys,re
tr=sys.argv[1]; t0=float(sys.argv[2])/1e6; t1=float(sys.argv[3])/1e6
pat=re.compile(r'^\s*(\S+)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\S+):\s*(.*)$')
for l in open(tr):
    m=pat.match(l)
    if not m: continue
    t=float(m.group(4))
    if t<t0 or t>t1: continue
    ev=m.group(5); rest=m.group(6)
    if ev=="tcp_probe":
        f=dict(x.split("=",1) for x in rest.split() if "=" in x)
        rest=" ".join(f"{k}={f.get(k)}" for k in ("sport","dport","data_len","snd_nxt","snd_una","snd_cwnd","snd_wnd","rcv_wnd","srtt","sock_cookie") if k in f)
    if ev=="sched_switch":
        rest=re.sub(r'prev_prio=\d+ |next_prio=\d+','',rest)
    print(f"{(t*1e6):.1f} cpu{m.group(3)} {m.group(1)[:10]}-{m.group(2)} {ev} {rest[:160]}")
