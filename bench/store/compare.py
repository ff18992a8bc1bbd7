#!/usr/bin/python3
"""Summarise bench/store raw.jsonl: medians over repetitions, cohort vs
TCPStore side by side, with ratios (throughput: cohort / tcpstore; latency
and rendezvous time: tcpstore / cohort, so > 1 means cohort is better)."""
import json
import statistics
import sys
from collections import defaultdict


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def size(b):
    return "1 MiB" if b >= 1 << 20 else f"{b} B"


rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
g = defaultdict(list)
for r in rows:
    if r["kind"] == "tp":
        key = ("tp", r["clients"], r["op"], r["value_bytes"])
    elif r["kind"] == "rdzv":
        key = ("rdzv", r["clients"], r["mode"])
    else:
        key = ("stall", r["clients"], r["phase"])
    g[(key, r["impl"])].append(r)
reps = max((len(v) for v in g.values()), default=0)

print(f"Medians of {reps} repetition(s) per cell; ratios > 1 favour cohort.\n")
print("### Throughput and latency (client processes, latency per call)\n")
print("| clients | op | value | cohort ops/s | TCPStore ops/s | ratio | cohort p50 / p99 / max µs "
      "| TCPStore p50 / p99 / max µs | p99 ratio |")
print("|---:|---|---:|---:|---:|---:|---|---|---:|")
tps = sorted({k for (k, _) in g if k[0] == "tp"}, key=lambda k: (k[1], k[3], ["set", "set_nowait", "get", "add"].index(k[2])))
for k in tps:
    c, t = g.get((k, "cohort"), []), g.get((k, "tcpstore"), [])
    co, to = med([r["ops_per_s"] for r in c]), med([r["ops_per_s"] for r in t])
    cl = [med([r[f] for r in c]) for f in ("p50_us", "p99_us", "max_us")]
    tl = [med([r[f] for r in t]) for f in ("p50_us", "p99_us", "max_us")]
    print(f"| {k[1]} | {k[2]} | {size(k[3])} | {fmt(co)} | {fmt(to)} | {ratio(co, to)} | "
          f"{' / '.join(fmt(x) for x in cl)} | {' / '.join(fmt(x) for x in tl)} | {ratio(tl[1], cl[1])} |")

print("\n### Rendezvous: N client processes connect, register and pass a barrier\n")
print("| clients | mode | cohort median / max ms | TCPStore median / max ms | ratio (median) |")
print("|---:|---|---|---|---:|")
for k in sorted({k for (k, _) in g if k[0] == "rdzv"}, key=lambda k: (k[1], k[2])):
    c, t = g.get((k, "cohort"), []), g.get((k, "tcpstore"), [])
    cm, cx = med([r["median_all_done_ms"] for r in c]), med([r["max_all_done_ms"] for r in c])
    tm, tx = med([r["median_all_done_ms"] for r in t]), med([r["max_all_done_ms"] for r in t])
    print(f"| {k[1]} | {k[2]} | {fmt(cm, 2)} / {fmt(cx, 2)} | {fmt(tm, 2)} / {fmt(tx, 2)} | {ratio(tm, cm)} |")

print("\n### Other clients while one connection holds half a frame\n")
print("| clients | phase | cohort ops/s | cohort p50 / p99 / max µs | TCPStore ops/s | TCPStore p50 / p99 / max µs |")
print("|---:|---|---:|---|---:|---|")
for k in sorted({k for (k, _) in g if k[0] == "stall"}, key=lambda k: (k[1], k[2] != "normal")):
    c, t = g.get((k, "cohort"), []), g.get((k, "tcpstore"), [])
    cl = [med([r[f] for r in c]) for f in ("p50_us", "p99_us", "max_us")]
    tl = [med([r[f] for r in t]) for f in ("p50_us", "p99_us", "max_us")]
    print(f"| {k[1]} | {k[2]} | {fmt(med([r['ops_per_s'] for r in c]))} | {' / '.join(fmt(x) for x in cl)} | "
          f"{fmt(med([r['ops_per_s'] for r in t]))} | {' / '.join(fmt(x) for x in tl)} |")

print("\n### CPU per operation (user + system µs; insensitive to the machine's load)\n")
print("| clients | op | value | cohort server / clients | TCPStore server / clients | total ratio |")
print("|---:|---|---:|---|---|---:|")
for k in tps:
    c, t = g.get((k, "cohort"), []), g.get((k, "tcpstore"), [])
    cs, cc = med([r.get("server_cpu_us_per_op") for r in c]), med([r.get("client_cpu_us_per_op") for r in c])
    ts, tc = med([r.get("server_cpu_us_per_op") for r in t]), med([r.get("client_cpu_us_per_op") for r in t])
    if None in (cs, cc, ts, tc):
        continue
    print(f"| {k[1]} | {k[2]} | {size(k[3])} | {fmt(cs)} / {fmt(cc)} | {fmt(ts)} / {fmt(tc)} | {ratio(ts + tc, cs + cc)} |")
