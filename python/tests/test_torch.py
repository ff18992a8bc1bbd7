"""cohort.torch: unchanged torch.distributed programs (torch_ranks.py) under
the check, as real multi-process gloo jobs under cohortrun and torchrun.

The python running pytest is the torch under test (scripts/test-python.sh
runs the suite with torch 2.13 on PATH and with Debian's torch 1.13).
"""
import os
import re
import socket
import subprocess
import sys

import pytest

from conftest import HERE, Job, cohortrun, job_env

torch = pytest.importorskip("torch")
OLD = torch.__version__.startswith("1.")
PROG = os.path.join(HERE, "torch_ranks.py")
N = 3
ODD = N - 1
EXIT_CODE = 86


def line_of(marker):
    with open(PROG) as f:
        for i, line in enumerate(f, 1):
            if marker in line:
                return i
    raise AssertionError(marker)


def run(case, *args, check=True, env=None, n=N, timeout=180):
    e = {"COHORT_TORCH_CHECK": "1" if check else "0"}
    e.update(env or {})
    cmd = [cohortrun(), "-n", str(n), sys.executable, "-m", "cohort.torch.run", PROG, case,
           *map(str, args)]
    p = subprocess.run(cmd, env=job_env(e), capture_output=True, text=True, timeout=timeout)
    job = Job(p.returncode, p.stdout, p.stderr)
    job.errlines = Job(0, p.stderr, "").lines  # reports go to stderr
    return job


def reports(job, n=N):
    """Each rank's report line (printed by the handler on every rank)."""
    out = {}
    for r in range(n):
        lines = [l for l in job.errlines[r] if l.startswith("cohort.torch: ")]
        assert lines, f"rank {r} printed no report\n{job}"
        out[r] = lines[0][len("cohort.torch: "):]
    return out


def test_correct_program_bit_identical_with_and_without_check():
    on = run("correct")
    off = run("correct", check=False)
    for job in (on, off):
        assert job.rc == 0, job
        for r in range(N):
            assert "OK correct" in job.lines[r], job
    for r in range(N):
        assert on.values(r, "DIGEST") == off.values(r, "DIGEST"), (on, off)
        assert on.values(r, "DIGEST") and off.values(r, "CHECKED") == []
        # the check ran: every collective of correct() went through it
        assert int(on.values(r, "CHECKED")[0]) >= (15 if OLD else 19), on


@pytest.mark.parametrize("off_rank,self_install", [(0, False), (ODD, False), (ODD, True)])
def test_check_off_on_one_rank_only_is_off_for_the_job(off_rank, self_install):
    # COHORT_TORCH_CHECK=0 on one rank (a per-rank wrapper): before session 38
    # the others waited for it to join cohort's world until COHORT_TIMEOUT
    # while it waited for them in gloo. Now it says so at start and nobody
    # checks; rank 0 prints one line naming it.
    wrap = (f'if [ "$LOCAL_RANK" = {off_rank} ]; then export COHORT_TORCH_CHECK=0; fi; '
            f'exec "$0" -m cohort.torch.run "$1" correct')
    cmd = [cohortrun(), "-n", str(N), "bash", "-c", wrap, sys.executable, PROG]
    # self_install: the program calls cohort.torch.install() itself too
    env = {"COHORT_TORCH_CHECK": "1", "COHORT_TIMEOUT": "60",
           "TORCH_RANKS_INSTALL": "1" if self_install else "0"}
    p = subprocess.run(cmd, env=job_env(env), capture_output=True, text=True, timeout=120)
    job = Job(p.returncode, p.stdout, p.stderr)
    errs = Job(0, p.stderr, "").lines
    on = run("correct")
    assert job.rc == 0, job
    other = 1 if off_rank == 0 else 0
    want = (f"cohort.torch: rank 0: the check is off for this job: COHORT_TORCH_CHECK=0 on rank "
            f"{off_rank} but not on rank {other} (set it for the whole job, not per rank)")
    assert [l for l in errs[0] if l.startswith("cohort.torch")] == [want], job
    for r in range(N):
        assert "OK correct" in job.lines[r], job
        assert job.values(r, "CHECKED") == [], job
        assert job.values(r, "DIGEST") == on.values(r, "DIGEST"), (job, on)
        if r:
            assert not [l for l in errs[r] if l.startswith("cohort.torch")], job


L = line_of("MISMATCH-LINE")
MISMATCHES = {
    # case: (call, what the report says)
    "count": (rf"all_reduce #2 \(torch_ranks.py:{L}\)",
              rf"count differs: ranks 0-1 have 8, rank 2 has 7 - look at rank 2's call at "
              rf"torch_ranks.py:{L}"),
    "dtype": (r"all_reduce #1 \(torch_ranks.py:\d+\)",
              r"type signature differs: ranks 0-1 have float32, rank 2 has float64 - look at "
              r"rank 2's call at torch_ranks.py:\d+"),
    "redop": (r"all_reduce #1", r"reduce op differs: ranks 0-1 have SUM, rank 2 has MAX"),
    "root": (r"broadcast #1", r"root differs: ranks 0-1 have 0, rank 2 has 1"),
    "op": (r"all_reduce #1", r"operation differs: ranks 0-1 have all_reduce, rank 2 has broadcast"
           r" - look at rank 2's call at torch_ranks.py:\d+ \(a different call site"),
    "extra": (r"all_reduce #2", rf"count differs: ranks 0-1 have 8, rank 2 has 4 - look at "
              rf"rank 2's call at torch_ranks.py:{line_of('EXTRA-LINE')} .*extra or a skipped"),
    "skip": (rf"broadcast #2 \(torch_ranks.py:{line_of('SKIPPED-LINE')}\)",
             r"operation differs: ranks 0-1 have broadcast, rank 2 has all_reduce"),
    "async": (r"all_reduce #1", r"count differs: ranks 0-1 have 8, rank 2 has 5"),
    "shape": (rf"all_reduce #1 \(torch_ranks.py:{line_of('SHAPE-LINE')}\)",
              r"arguments differs: ranks 0-1 have shape 2x4, rank 2 has shape 4x2"),
    # gloo may abort a rank for the odd rank's data before that rank reached
    # its own call: then no majority, and the report says it made none yet
    "ddp": (r"default pg: all_reduce #1\b",
            r"type signature differs: .*float32.*rank 2 has float64.*<DDP gradient bucket 0>:0"),
    "pg": (rf"all_reduce #2 \(torch_ranks.py:{line_of('PG-LINE')}\)",
           r"count differs: ranks 0-1 have 8, rank 2 has 7"),
    "functional": (rf"functional all_reduce #1 \(torch_ranks.py:{line_of('FC-LINE')}\)",
                   r"count differs: ranks 0-1 have 8, rank 2 has 3"),
    "abort": (rf"all_reduce #2 \(torch_ranks.py:{line_of('ABORT-LINE')}\)",
              r"count differs: ranks 0-1 have 8, rank 2 has 7"),
    "raise": (rf"all_reduce #2 \(torch_ranks.py:{line_of('RAISE-LINE')}\)",
              r"count differs: ranks 0-1 have 8, rank 2 has 7"),
    "subgroup": (r"new_group\(\[0,1\]\) #1: all_reduce #1",
                 r"type signature differs: rank 0 has float32 \(torch_ranks.py:\d+\), rank 1 has "
                 r"int32 \(torch_ranks.py:\d+\)"),
}
# torch 1.13: the cheap ones
CASES = (["count", "subgroup", "abort", "shape"] if OLD else list(MISMATCHES))


@pytest.mark.parametrize("case", CASES)
def test_mismatch_reported_on_every_rank(case):
    job = run(case)
    assert job.rc == EXIT_CODE, job
    call, what = MISMATCHES[case]
    reps = reports(job)
    assert len(set(reps.values())) == 1, reps  # the same report everywhere
    text = reps[0]
    assert re.search(call, text), (call, text)
    assert re.search(what, text), (what, text)
    for r in range(N):
        assert f"OK {case}" not in job.lines[r], job
    assert f"exited with code {EXIT_CODE}" in job.err, job


@pytest.mark.parametrize("case", ["count", "abort"] if OLD else ["count", "dtype", "abort"])
def test_two_ranks_checked_after_the_backend(case):
    """Two ranks on one host compare each other: the default checks a
    blocking call after the backend returned (no hand-off before it), and
    still neither rank returns from the mismatched call - both raise the
    same report (or gloo's abort is held for it)."""
    job = run(case, n=2)
    assert job.rc == EXIT_CODE, job
    reps = reports(job, n=2)
    assert len(set(reps.values())) == 1, reps
    assert re.search(r"rank 1 has (7|float64)", reps[0]), reps[0]
    for r in range(2):
        assert f"OK {case}" not in job.lines[r], job
    assert "signal 6" not in job.err, job


@pytest.mark.parametrize("c_path", ["1", "0"])
def test_keyword_and_positional_calls_bind_alike(c_path):
    """The per-call path in C (Checker.torch_call) and the Python wrappers
    (COHORT_TORCH_C=0) bind positional and keyword arguments to the same
    fingerprint: the odd rank writes every call differently and nothing is
    reported, until its broadcast's root (given by keyword) differs - at its
    own call site, taken in C from the caller's frame."""
    job = run("bind", env={"COHORT_TORCH_C": c_path})
    assert job.rc == EXIT_CODE, job
    kind = "TorchCall" if c_path == "1" else "function"
    for r in range(N):
        assert job.values(r, "PATH") == [f"{kind} {kind}"], job
    # every rank got past the differently written calls; recv got send's tensor
    assert job.values(0, "BOUND") and job.values(0, "BOUND") == job.values(1, "BOUND"), job
    assert job.values(ODD, "BOUND"), job
    reps = reports(job)
    assert len(set(reps.values())) == 1, reps
    assert re.search(r"default pg: broadcast #9 ", reps[0]), reps[0]
    assert re.search(rf"root differs: ranks 0-1 have 0, rank 2 has 1 - look at rank 2's call at "
                     rf"torch_ranks.py:{line_of('KW-LINE')}\b", reps[0]), reps[0]


def test_backend_abort_is_held_for_the_report():
    """gloo aborts a rank on a size mismatch before the check compared the
    call: the abort waits for the report (case "abort" above); here the
    aborting rank's own output shows it did. Without the wait before a
    blocking call (COHORT_TORCH_PREWAIT=0) the odd rank, first in, enters
    the backend; with it, it would find the mismatch before."""
    job = run("abort", env={"COHORT_TORCH_PREWAIT": "0"})
    assert job.rc == EXIT_CODE, job
    assert any("aborting (SIGABRT): waiting for the contract check's report" in l
               for l in job.errlines[ODD]), job
    assert "signal 6" not in job.err, job


def test_backend_error_without_mismatch_reaches_the_program():
    job = run("backend_error")
    assert job.rc == 0, job
    for r in range(N):
        assert job.values(r, "CAUGHT") == ["backend: simulated failure"], job
        assert "OK backend_error" in job.lines[r], job
        assert not [l for l in job.errlines[r] if l.startswith("cohort")], job


@pytest.mark.skipif(OLD, reason="torch 2.x")
def test_stall_names_the_late_rank():
    job = run("stall", 3, env={"COHORT_STALL_WARN": "1"})
    assert job.rc == 0, job
    site = f"torch_ranks.py:{line_of('STALL-LINE')}"
    for r in range(N - 1):
        stalls = [l for l in job.errlines[r] if l.startswith("cohort.torch: stall: ")]
        assert stalls, job
        assert site in stalls[0] and "not in this call: member(s) 2" in stalls[0], stalls[0]
    for r in range(N):
        assert "OK stall" in job.lines[r], job


@pytest.mark.skipif(OLD, reason="torch 2.x")
def test_dead_rank_ends_the_job():
    job = run("dead", timeout=120)
    assert job.rc != 0, job
    assert "rank 2 failed first: was killed by signal 9 (SIGKILL)" in job.err, job
    for r in range(N):
        assert "OK dead" not in job.lines[r], job


def test_runner_usage():
    p = subprocess.run([sys.executable, "-m", "cohort.torch.run"], capture_output=True, text=True,
                       env=job_env())
    assert p.returncode == 2 and "usage" in p.stderr, p


def torchrun(case, check=True):
    with socket.socket() as s:  # torchrun passes --master_port=0 on as MASTER_PORT=0
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={port}", "-m", "cohort.torch.run", PROG, case]
    env = job_env({"COHORT_TORCH_CHECK": "1" if check else "0"})
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.skipif(OLD, reason="Debian's torch 1.13 torchrun crashes on Python 3.11")
def test_under_torchrun():
    ok = torchrun("correct")
    assert ok.returncode == 0, ok.stdout + ok.stderr[-4000:]
    assert ok.stdout.count("OK correct") == 2 and ok.stdout.count("CHECKED") == 2, ok.stdout
    bad = torchrun("count")
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0, out[-4000:]
    assert re.search(r"cohort.torch: default pg: all_reduce #2: count "
                     r"differs: rank 0 has 8 \(torch_ranks.py:\d+\), rank 1 has 7", out), out[-4000:]
    assert f"exitcode  : {EXIT_CODE}" in out or f"exit code {EXIT_CODE}" in out or \
        f"exitcode: {EXIT_CODE}" in out, out[-4000:]


@pytest.mark.skipif(OLD, reason="torch 2.x")
def test_cost_benchmark_smoke(tmp_path):
    """bench/torch/run.sh end to end with one tiny round (the numbers mean nothing)."""
    from conftest import ROOT
    env = job_env({"ROUNDS": "1", "ITERS": "20", "SIZES": "8,65536", "PY": sys.executable,
                   "COHORTRUN": cohortrun(), "OUT": str(tmp_path)})
    p = subprocess.run([os.path.join(ROOT, "bench", "torch", "run.sh")], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    for s in ("none", "cohort", "detail"):
        for size in (8, 65536):
            assert re.search(rf"^\s+{size} {s}\s+\d", p.stdout, re.M), p.stdout
