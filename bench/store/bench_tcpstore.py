#!/usr/bin/python3
"""PyTorch TCPStore side of the store benchmark (bench/store/run.sh).

Adapted from the peer baseline shared/peers/store/bench_tcpstore.py (same
method: the master in its own forked process, every client a separate forked
process with its own TCPStore connection, latency timed around each Python
call), cut into one cell per invocation so run.sh can interleave it with
store_bench cell by cell. Prints one JSON object per line, in store_bench's
format, with "impl": "tcpstore".

usage: bench_tcpstore.py tp CLIENTS set|get|add VALUE_BYTES SECONDS
       bench_tcpstore.py rdzv CLIENTS ROUNDS [pre]
       bench_tcpstore.py stall CLIENTS SECONDS_PER_PHASE
"""
import json
import multiprocessing as mp
import os
import resource
import socket
import statistics
import struct
import sys
import time
from datetime import timedelta

import torch.distributed as dist

HOST = "127.0.0.1"
CTX = mp.get_context("fork")
MAXLAT = 20000


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            d = {l.split(":")[0]: l.split(":")[1].strip() for l in f}
        return int(d["VmHWM"].split()[0])
    except Exception:
        return None


def proc_cpu_s(pid):
    """CPU seconds (user + system) a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _master_main(conn):
    st = dist.TCPStore(HOST, 0, None, True, timedelta(seconds=600), wait_for_workers=False)
    conn.send(st.port)
    conn.recv()  # block until told to stop
    os._exit(0)


class Master:
    def __init__(self):
        self.parent, child = CTX.Pipe()
        self.p = CTX.Process(target=_master_main, args=(child,), daemon=True)
        self.p.start()
        self.port = self.parent.recv()

    def stop(self):
        try:
            self.parent.send("stop")
        except Exception:
            pass
        self.p.join(5)
        if self.p.is_alive():
            self.p.kill()
            self.p.join()


def client(port, timeout_s=600):
    return dist.TCPStore(HOST, port, None, False, timedelta(seconds=timeout_s), wait_for_workers=False)


def subsample(lat):
    if len(lat) > MAXLAT:
        step = len(lat) / float(MAXLAT)
        lat = [lat[int(i * step)] for i in range(MAXLAT)]
    return lat


# --------------------------------------------------------------- throughput
def _tp_worker(cid, port, op, vsize, duration, barrier, q):
    st = client(port)
    val = os.urandom(vsize)
    nk = 32 if vsize < 65536 else 2
    keys = [f"k{cid}_{i}" for i in range(nk)]
    if op == "get":
        for k in keys:
            st.set(k, val)
    lat = []
    barrier.wait()
    t0 = time.perf_counter()
    end = t0 + duration
    n = 0
    pc = time.perf_counter
    while True:
        a = pc()
        if op in ("set", "set_nowait"):
            # one operation: torch 1.13's set is unacknowledged, which is what
            # cohort calls set_nowait; the "set" rows compare it with cohort's
            # acknowledged set
            st.set(keys[n % nk], val)
        elif op == "get":
            st.get(keys[n % nk])
        else:
            st.add("ctr", 1)
        b = pc()
        lat.append(b - a)
        n += 1
        if b >= end:
            break
    # set() is fire-and-forget in torch 1.13 (no reply): one round trip at the
    # end so the elapsed time covers the server applying every SET.
    st.num_keys()
    el = time.perf_counter() - t0
    q.put((cid, n, el, subsample(lat)))
    q.close()
    q.join_thread()
    os._exit(0)


def throughput(n_clients, op, vsize, duration):
    m = Master()
    barrier = CTX.Barrier(n_clients)
    q = CTX.Queue()
    ps = [CTX.Process(target=_tp_worker, args=(i, m.port, op, vsize, duration, barrier, q))
          for i in range(n_clients)]
    srv0 = proc_cpu_s(m.p.pid)
    kid0 = children_cpu_s()
    for p in ps:
        p.start()
    res = [q.get(timeout=duration * 10 + 120) for _ in ps]
    srv = proc_cpu_s(m.p.pid) - srv0
    for p in ps:
        p.join()
    # the clients' CPU includes their start-up after fork (connect, preset)
    kid = children_cpu_s() - kid0
    hwm = hwm_kb(m.p.pid)
    m.stop()
    total = sum(r[1] for r in res)
    wall = max(r[2] for r in res)
    lats = [x for r in res for x in r[3]]
    return dict(impl="tcpstore", kind="tp", clients=n_clients, op=op, value_bytes=vsize,
                duration_s=round(wall, 3), ops=total, ops_per_s=round(total / wall, 1),
                MB_per_s=round(total * vsize / wall / 1e6, 1),
                p50_us=round(pct(lats, 50) * 1e6, 1), p99_us=round(pct(lats, 99) * 1e6, 1),
                max_us=round(max(lats) * 1e6, 1), server_hwm_kb=hwm,
                server_cpu_us_per_op=round(srv * 1e6 / total, 2),
                client_cpu_us_per_op=round(kid * 1e6 / total, 2))


# --------------------------------------------------------------- rendezvous
def _rd_worker(cid, port, n, rounds, ready, go_events, q, pre):
    out = []
    st = client(port) if pre else None
    for r in range(rounds):
        ready.wait()
        go_events[r].wait()
        t_start = time.monotonic()
        if not pre:
            # full rendezvous: connect + register (add init/) + barrier
            st = dist.TCPStore(HOST, port, n, False, timedelta(seconds=600), wait_for_workers=True)
        t_conn = time.monotonic()
        c = st.add(f"barrier{r}", 1)
        if c == n:
            st.set(f"done{r}", b"1")
        else:
            st.wait([f"done{r}"])
        t_end = time.monotonic()
        out.append((r, t_start, t_conn, t_end))
        if not pre:
            del st
            st = None
    q.put((cid, out))
    q.close()
    q.join_thread()
    os._exit(0)


def rendezvous(n, rounds, pre):
    m = Master()
    ready = CTX.Barrier(n + 1)
    go = [CTX.Event() for _ in range(rounds)]
    q = CTX.Queue()
    t_fork = time.monotonic()
    ps = [CTX.Process(target=_rd_worker, args=(i, m.port, n, rounds, ready, go, q, pre))
          for i in range(n)]
    for p in ps:
        p.start()
    t_forked = time.monotonic()
    t_go = []
    for r in range(rounds):
        ready.wait()
        time.sleep(0.2)  # let everybody block on the event
        t_go.append(time.monotonic())
        go[r].set()
    res = [q.get(timeout=900) for _ in ps]
    for p in ps:
        p.join()
    m.stop()
    done = []
    for r in range(rounds):
        ends = [o[3] for _, out in res for o in out if o[0] == r]
        done.append(round((max(ends) - t_go[r]) * 1e3, 2))
    return dict(impl="tcpstore", kind="rdzv", clients=n,
                mode="preconnected barrier" if pre else "connect+register+barrier",
                rounds=rounds, median_all_done_ms=round(statistics.median(done), 2),
                max_all_done_ms=max(done), fork_ms=round((t_forked - t_fork) * 1e3, 1))


# --------------------------------------------------------------- partial frame held
def _stall_worker(cid, port, phase, barrier, q):
    st = client(port)
    k = f"s{cid}"
    lat = [[], []]
    barrier.wait()
    t0 = time.perf_counter()
    pc = time.perf_counter
    while True:
        a = pc()
        if a - t0 >= 2 * phase:
            break
        ph = 0 if a - t0 < phase else 1
        st.set(k, b"0123456789abcdef")
        st.get(k)
        lat[ph].append(pc() - a)
    q.put((cid, len(lat[0]), len(lat[1]), subsample(lat[0]), subsample(lat[1])))
    q.close()
    q.join_thread()
    os._exit(0)


def stall(n, phase):
    m = Master()
    barrier = CTX.Barrier(n + 1)
    q = CTX.Queue()
    ps = [CTX.Process(target=_stall_worker, args=(i, m.port, phase, barrier, q)) for i in range(n)]
    for p in ps:
        p.start()
    barrier.wait()
    time.sleep(phase)
    # a valid SET header announcing a 100-byte key, 10 bytes of it, held open
    s = socket.create_connection((HOST, m.port))
    s.sendall(b"\x00" + struct.pack("<Q", 100) + b"/" * 10)
    # held for the second phase, then released (TCPStore's clients are frozen
    # until then: they could not report otherwise)
    time.sleep(phase)
    s.close()
    res = [q.get(timeout=phase * 20 + 120) for _ in ps]
    for p in ps:
        p.join()
    m.stop()
    rows = []
    for ph, name in ((0, "normal"), (1, "partial frame held")):
        lats = [x for r in res for x in r[3 + ph]]
        ops = sum(r[1 + ph] for r in res)
        rows.append(dict(impl="tcpstore", kind="stall", clients=n, phase=name,
                         ops_per_s=round(ops / phase, 1),
                         p50_us=round(pct(lats, 50) * 1e6, 1) if lats else None,
                         p99_us=round(pct(lats, 99) * 1e6, 1) if lats else None,
                         max_us=round(max(lats) * 1e6, 1) if lats else None))
    return rows


def main():
    a = sys.argv[1:]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (65536, max(hard, 65536)))
    except (ValueError, OSError):
        pass
    if len(a) == 5 and a[0] == "tp":
        print(json.dumps(throughput(int(a[1]), a[2], int(a[3]), float(a[4]))), flush=True)
    elif len(a) in (3, 4) and a[0] == "rdzv":
        print(json.dumps(rendezvous(int(a[1]), int(a[2]), len(a) == 4 and a[3] == "pre")), flush=True)
    elif len(a) == 3 and a[0] == "stall":
        for row in stall(int(a[1]), float(a[2])):
            print(json.dumps(row), flush=True)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
