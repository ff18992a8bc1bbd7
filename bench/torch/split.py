"""Where cohort.torch's time per call goes, inside one gloo program
(docs/pytorch.md, "Cost"): alternating blocks of 200 dist.all_reduce calls
at 8 B - "raw" (torch's function, no check), "b_file"/"b_site"/"b_wait"
(Checker.begin with a given / the captured call site, + wait, around the
raw call), "pywrap" (cohort.torch's Python wrapper) and "wrapped" (what
install() put in place: the per-call path in C, Checker.torch_call) - with, per mode and per
call, each thread's CPU time, run-queue wait, time slices and voluntary /
involuntary context switches from /proc/self/task/*/{schedstat,status}
(counts are robust on a loaded machine; times are paired by the blocks).
  cohortrun -n 2 python3 -m cohort.torch.run bench/torch/split.py [ROUNDS]
MODES=raw,wrapped selects modes; PERF_OUT=FILE records rank 0's main thread
with perf (cpu-clock; PERF_G=1: with call graphs) during the timed blocks
and writes each block's mode and CLOCK_MONOTONIC span to FILE.marks, so that
bench/torch/perfsplit.py can split the samples by mode; SPLIT_BYTES=N calls with N bytes
of float32 instead of 8 (e.g. 1048576: the 3 % target at 1 MiB, paired in one
program, where launch-to-launch spread is 4x); SPLIT_TOUCH=N writes N bytes of
a scratch tensor before each call in every mode (a large call's cache state
at a small size).
"""
import os
import sys
import time

import torch
import torch.distributed as dist

import cohort.torch as ct

def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    blk = 200
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    st = ct._state
    chk = st.chk
    wrapped = dist.all_reduce
    orig = wrapped.__cohort_original__
    pywrap = getattr(wrapped, "__cohort_python__", wrapped)  # the Python wrapper
    cg = st.group_for(None)
    t = torch.ones(max(1, int(os.environ.get("SPLIT_BYTES", "8")) // 4), dtype=torch.float32)
    pc = time.perf_counter_ns
    # SPLIT_TOUCH=N: write N bytes of a scratch tensor before every call, in
    # every mode (outside the timed call): the caches as a large collective
    # leaves them, at a small size - does the check's own cost grow with it?
    touch = int(os.environ.get("SPLIT_TOUCH", "0")) // 4
    scratch = torch.empty(max(1, touch), dtype=torch.float32)
    def raw(t):
        ct._torch_set_depth(1)
        try:
            orig(t)
        finally:
            ct._torch_set_depth(0)
    def begin_only(t):  # begin with explicit file (no frame walk), end unsynced
        seq = chk.begin(cg, "all_reduce", 2, "float32", 0, "SUM", -1, None, 0, "x.py", 1)
        raw(t)
        chk.end(cg, seq)
    def begin_site(t):
        seq = chk.begin(cg, "all_reduce", 2, "float32", 0, "SUM", -1, None)
        raw(t)
        chk.end(cg, seq)
    def begin_wait(t):
        seq = chk.begin(cg, "all_reduce", 2, "float32", 0, "SUM", -1, None)
        raw(t)
        chk.wait(cg, seq)
        chk.end(cg, seq, True)
    modes = [("raw", raw), ("b_file", begin_only), ("b_site", begin_site), ("b_wait", begin_wait), ("pywrap", pywrap), ("wrapped", wrapped)]
    sel = os.environ.get("MODES")
    if sel:
        modes = [m for m in modes if m[0] in sel.split(",")]
    res = {m: [] for m, _ in modes}
    blocks = {m: [] for m, _ in modes}  # each block's p50: paired by round
    acc = {m: {} for m, _ in modes}
    def snap():
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                run, wait, sl = map(int, open(f"/proc/self/task/{tid}/schedstat").read().split())
                comm = open(f"/proc/self/task/{tid}/comm").read().strip()
                vc = nvc = 0
                for line in open(f"/proc/self/task/{tid}/status"):
                    if line.startswith("voluntary_ctxt_switches"): vc = int(line.split()[1])
                    if line.startswith("nonvoluntary_ctxt_switches"): nvc = int(line.split()[1])
            except OSError:
                continue
            key = "main" if int(tid) == os.getpid() else comm
            o = out.setdefault(key, [0, 0, 0, 0, 0, 0])
            for i, v in enumerate((run, wait, sl, vc, nvc, 1)): o[i] += v
        return out
    for _ in range(300):
        wrapped(t)
    s0 = chk.stats()
    perf = None
    if os.environ.get("PERF_OUT") and rank == 0:
        import subprocess, signal
        # -k CLOCK_MONOTONIC: the samples' times match the block marks below
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "20000", "-k", "CLOCK_MONOTONIC"]
                                + (["-g"] if os.environ.get("PERF_G") else [])
                                + ["-t", str(os.getpid()), "-o", os.environ["PERF_OUT"]])
        time.sleep(1.0)
    marks = []  # (mode, start, end) of each block, CLOCK_MONOTONIC ns
    mono = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    for r in range(n):
        for m, f in (modes if r % 2 == 0 else modes[::-1]):
            ts = res[m]
            a = snap()
            m0 = mono()
            for _ in range(blk):
                if touch:
                    scratch.fill_(1.0)
                t0 = pc(); f(t); ts.append(pc() - t0)
            marks.append((m, m0, mono()))
            blocks[m].append(sorted(ts[-blk:])[blk // 2])
            b = snap()
            for k in b:
                d = acc[m].setdefault(k, [0] * 6)
                for i in range(5): d[i] += b[k][i] - a.get(k, [0] * 6)[i]
                d[5] = b[k][5]
    s1 = chk.stats()
    if perf:
        perf.send_signal(signal.SIGINT); perf.wait()
        with open(os.environ["PERF_OUT"] + ".marks", "w") as fm:
            fm.writelines(f"{m} {a} {b}\n" for m, a, b in marks)
    if rank == 0:
        base = sorted(res["raw"])[len(res["raw"]) // 2] / 1e3 if "raw" in res else 0
        for m in res:
            ts = sorted(res[m])
            q = lambda f: ts[int(f * len(ts))] / 1e3
            print(f"SPLIT {m:8} n={len(ts)} p10 {q(.1):7.1f} p50 {q(.5):7.1f} (+{q(.5)-base:5.1f}) p90 {q(.9):7.1f}", flush=True)
        # the pooled p50 above moves with whatever state the host was in
        # during each block; the ratio of two blocks of one round does less
        if "raw" in blocks:
            for m in blocks:
                if m == "raw":
                    continue
                rs = sorted(x / y for x, y in zip(blocks[m], blocks["raw"]))
                qr = lambda f: rs[min(len(rs) - 1, int(f * len(rs)))]
                print(f"PAIRED {m:8} rounds={len(rs)} block p50 / raw's: median x{qr(.5):.3f} "
                      f"[q1 x{qr(.25):.3f}, q3 x{qr(.75):.3f}], slower in {sum(r > 1 for r in rs)}/{len(rs)}",
                      flush=True)
    for m in acc:
        N = len(res[m])
        print(f"[{rank}] {m:8} per call: " + "  ".join(
            f"{k}(x{v[5]}): run {v[0]/N/1e3:.1f}us rq {v[1]/N/1e3:.1f}us sl {v[2]/N:.2f} vcs {v[3]/N:.2f} nvcs {v[4]/N:.2f}"
            for k, v in sorted(acc[m].items()) if v[2]), flush=True)
    print(f"[{rank}] stats delta", {k: s1[k] - s0[k] for k in s1}, flush=True)
    dist.barrier()
    dist.destroy_process_group()

main()
