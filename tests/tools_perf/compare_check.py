#!/usr/bin/env python3
"""Smoke test of bench/compare/check and summarize.py (the comparison itself is not in
the test suite: timing is noisy). Builds a tiny results directory from two real
cohort-perf launches plus peer and memcpy lines written here, then checks that:
  - check prints every target, "met" where the peer is made slow, exit 0;
  - with a fast peer it prints MISSED with the cells' per-launch spread, exit 1;
  - too few launches is a miss unless --min-launches allows it;
  - summarize.py writes compare.md with what each launch used (cohort's algorithm and
    copy path from cohort-perf's header, Open MPI's pml/btl from its verbose lines);
  - run.sh, sent SIGTERM during a launch, stops it (no rank left), marks the partial
    results and exits 143 (skipped, said so, where run.sh's peers are not installed).
Usage: compare_check.py COHORT_PERF SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

perf, src = sys.argv[1], sys.argv[2]
check = os.path.join(src, "bench", "compare", "check")
summ = os.path.join(src, "bench", "compare", "summarize.py")
fails = []


def expect(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def peer_file(path, lat):
    with open(path, "w") as f:
        f.write("# cmd: mpirun ...\n# date: 2026-12-01T00:00:00+00:00  load: 0.50 0.40 0.30  "
                "busy before: 1%\n")
        f.write("[vm:1] select: component ob1 selected\n")
        f.write("[vm:1] mca: bml: Using vader btl for send to [[1,1],0] on node vm\n")
        f.write("coll bytes ranks lat_us min_rank_us algbw_GBs busbw_GBs rep check\n")
        for op in ("allreduce", "bcast"):
            for b in (8, 1048576):
                f.write(f"{op:<16} {b:>10} 2 {lat:.2f} {lat:.2f} 0.1 0.1 0 ok iters=10\n")
        f.write("# after: 2026-12-01T00:00:01+00:00  load: 0.60 0.40 0.30\n")


with tempfile.TemporaryDirectory() as d:
    raw = os.path.join(d, "raw", "shm2")
    os.makedirs(raw)
    os.makedirs(os.path.join(d, "raw", "memcpy"))
    for k in (1, 2):
        base = os.path.join(raw, f"cohort.{k}")
        with open(base + ".txt", "w") as out:
            r = subprocess.run([perf, "--np", "2", "--coll", "all_reduce,broadcast", "--sizes",
                                "8,1048576", "-n", "20", "-w", "2", "--in-place", "no",
                                "--json-out", base + ".json"], stdout=out, stderr=subprocess.STDOUT,
                               timeout=120)
        expect(r.returncode == 0, f"cohort-perf launch {k} exit {r.returncode}")
    for k in (1, 2):
        with open(os.path.join(d, "raw", "memcpy", f"memcpy.{k}.txt"), "w") as f:
            f.write("memcpy 1048576 1000000.0 1000000.0 1000000.0 1000000.0 0.00\n")
    txt = open(os.path.join(raw, "cohort.1.txt")).read()
    expect("# cohort: broadcast from 8 B: algorithm shm" in txt, "cohort-perf names its algorithm")
    expect("copy: " in txt, "cohort-perf names its copy path")

    # A peer a million times slower: every measured target is met.
    for k in (1, 2):
        peer_file(os.path.join(raw, f"ompi.{k}.txt"), 1e6)
    r = subprocess.run([sys.executable, check, d, "--min-launches", "2"], capture_output=True,
                       text=True, timeout=120)
    print(r.stdout)
    expect(r.returncode == 0, f"slow peer: exit {r.returncode}, want 0")
    expect("met           shm 2/4/8 ranks" in r.stdout, "slow peer: the shm target is met")
    expect("met           2-rank broadcast 1 MiB <= 1.3x one memcpy" in r.stdout,
           "the memcpy target is read")
    expect("NOT MEASURED  TCP 2 and 4 ranks" in r.stdout, "an absent configuration is not measured")

    # Too few launches for the default of 5: a miss.
    r = subprocess.run([sys.executable, check, d], capture_output=True, text=True, timeout=120)
    expect(r.returncode == 1 and "too few launches" in r.stdout,
           f"2 launches < 5: exit {r.returncode}, want 1 with 'too few launches'")

    # A peer faster than anything: missed, with the spread of each side.
    for k in (1, 2):
        peer_file(os.path.join(raw, f"ompi.{k}.txt"), 0.01)
    r = subprocess.run([sys.executable, check, d, "--min-launches", "2"], capture_output=True,
                       text=True, timeout=120)
    print(r.stdout)
    expect(r.returncode == 1, f"fast peer: exit {r.returncode}, want 1")
    expect("MISSED" in r.stdout and "(launches " in r.stdout and "vs Open MPI" in r.stdout,
           "a miss shows both sides' launches")

    # The TCP configurations: 4 ranks across two namespaces (Gloo target) and
    # 2 ranks OSU style across them (Open MPI target); cohort's records reused.
    import shutil
    for cfg in ("netns4", "netns2osu"):
        os.makedirs(os.path.join(d, "raw", cfg))
        for k in (1, 2):
            shutil.copy(os.path.join(raw, f"cohort.{k}.json"),
                        os.path.join(d, "raw", cfg, f"cohort.{k}.json"))
            peer_file(os.path.join(d, "raw", cfg, f"ompi.{k}.txt"), 1e6)
            if cfg == "netns4":
                peer_file(os.path.join(d, "raw", cfg, f"gloo.{k}.txt"), 0.01)
    r = subprocess.run([sys.executable, check, d, "--min-launches", "2"], capture_output=True,
                       text=True, timeout=120)
    print(r.stdout)
    expect("met           TCP 2 and 4 ranks, loopback and 2 namespaces" in r.stdout and
           "worst netns" in r.stdout, "the netns configurations count for the Open MPI TCP target")
    expect("MISSED (1 of 1 cells) TCP 4 ranks on 2 cores" in r.stdout and
           "netns4 broadcast 1 MiB" in r.stdout and "vs Gloo" in r.stdout,
           "netns4 broadcast is judged against Gloo")

    r = subprocess.run([sys.executable, summ, d], capture_output=True, text=True, timeout=120)
    expect(r.returncode == 0, f"summarize.py exit {r.returncode}: {r.stderr[-500:]}")
    md = open(os.path.join(d, "compare.md")).read() if r.returncode == 0 else ""
    expect("what each launch used" in md and "pml: ob1" in md and "btl: vader" in md,
           "compare.md lists Open MPI's pml and btl")
    expect("algorithm shm" in md, "compare.md lists cohort's algorithm")


def procs_naming(text):
    """Live processes whose command line contains text."""
    hits = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                raw = open(f"/proc/{d}/cmdline", "rb").read()
            except OSError:
                continue
            # any process's arguments: not necessarily UTF-8 (one with 0xff failed this)
            c = raw.replace(b"\0", b" ").decode(errors="replace")
            if text in c:
                hits.append(f"{d}: {c}")
    return hits


# SIGTERM mid-launch: run.sh stops the launch (every rank) at once, marks the
# partial results, exits 143; summarize.py still reads what is there. Needs
# the peers run.sh builds at setup (Open MPI, MPICH, gnuplot, torch): without
# them run.sh refuses to start (exit 2) and this part is skipped, said so.
import signal
import time
with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "res")
    env = dict(os.environ, COHORT_PERF=perf, QUICK="1", CONFIGS="contract", T="2",
               QUIET_WAIT="0", RESULTS=out)
    p = subprocess.Popen(["bash", os.path.join(src, "bench", "compare", "run.sh")], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    end = time.time() + 200
    while time.time() < end and p.poll() is None and not procs_naming(out + "/raw/"):
        time.sleep(0.2)
    if p.poll() is not None and p.returncode == 2:
        print("SKIP run.sh signal smoke test:", p.stderr.read().strip().splitlines()[-1])
    else:
        running = procs_naming(out + "/raw/")
        expect(running, "run.sh started a cohort-perf launch within 200 s")
        time.sleep(1)
        t0 = time.time()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        took = time.time() - t0
        err = p.stderr.read()
        print(f"run.sh after SIGTERM: exit {rc} in {took:.1f} s; {err.strip().splitlines()[-1]}")
        expect(rc == 143, f"run.sh exits 143 on SIGTERM, got {rc}")
        # the launch had ~30 s to go (2 s a size); timeout(1) kills at 10 s
        expect(took < 20, f"run.sh stopped {took:.1f} s after SIGTERM")
        # SIGKILLed ranks may take a moment to be torn down on a loaded machine
        end = time.time() + 10
        while procs_naming(out) and time.time() < end:
            time.sleep(0.2)
        left = procs_naming(out)
        expect(not left, f"no launch outlives run.sh: {left}")
        info = open(os.path.join(out, "run_info.txt")).read()
        expect("# stopped: SIGTERM" in info, "run_info.txt says the run was stopped")
        raws = [open(os.path.join(out, "raw", "contract", f)).read()
                for f in os.listdir(os.path.join(out, "raw", "contract")) if f.endswith(".txt")]
        expect(any("# interrupted: SIGTERM" in t for t in raws),
               "the interrupted launch's file says so")
        r = subprocess.run([sys.executable, summ, out], capture_output=True, text=True,
                           timeout=120)
        expect(r.returncode == 0, f"summarize.py reads partial results: exit {r.returncode} "
               f"{r.stderr[-300:]}")

r = subprocess.run(["bash", os.path.join(src, "bench", "compare", "run.sh")],
                   env=dict(os.environ, PRESET="nosuch"), capture_output=True, text=True)
expect(r.returncode == 2 and "unknown PRESET=nosuch" in r.stderr, "run.sh refuses an unknown preset")
r = subprocess.run([sys.executable, check, "/nonexistent"], capture_output=True, text=True)
expect(r.returncode == 2, "a directory without raw/ is a usage error")
print("FAILED" if fails else "OK")
sys.exit(1 if fails else 0)
