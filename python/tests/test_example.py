"""examples/python/train.py under cohortrun: the C demo's training in numpy."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, Job, cohortrun, job_env

TRAIN = os.path.join(ROOT, "examples", "python", "train.py")


def run(n, *args, launcher_args=(), timeout=300):
    cmd = [cohortrun(), "-n", str(n), *launcher_args, sys.executable, TRAIN, *map(str, args)]
    p = subprocess.run(cmd, env=job_env(), capture_output=True, text=True, timeout=timeout)
    return Job(p.returncode, p.stdout, p.stderr)


def final_loss(job):
    (v,) = job.values(0, "final loss")
    return float(v.split()[0])


def test_trains_like_the_c_demo():
    job = run(4)
    assert job.rc == 0, job
    loss = final_loss(job)
    assert loss < 0.35, job
    c_train = os.path.join(ROOT, "build", "examples", "train")
    if os.access(c_train, os.X_OK):
        # the same data (same splitmix64 stream) and the same updates: the
        # losses agree up to the order of the float sums
        p = subprocess.run([cohortrun(), "-n", "4", c_train], env=job_env(), capture_output=True,
                           text=True, timeout=300)
        m = re.search(r"final loss (\S+)", p.stdout)
        assert p.returncode == 0 and m, p.stdout + p.stderr
        assert abs(float(m.group(1)) - loss) < 1e-9, (m.group(1), loss)


def test_mismatch_is_a_contract_error_on_every_rank():
    job = run(4, "--steps", 20, "--mismatch-at", 5)
    assert job.rc == 3, job
    msgs = set(re.findall(r"rank \d: ContractError: (.*)", job.err))
    assert len(msgs) == 1, job  # the same message wherever it was printed
    (m,) = msgs
    assert "count differs: ranks 0-2 have 18, rank 3 has 17" in m, m
    assert re.search(r"\(train\.py:\d+\)", m), m


def test_killed_rank_resumes_from_checkpoint(tmp_path):
    job = run(4, "--kill-at", 25, "--ckpt-dir", tmp_path, launcher_args=("--max-restarts", "1"))
    assert job.rc == 0, job
    assert "(generation 2)" in job.out, job
    clean = run(4)
    assert final_loss(job) == final_loss(clean), (job, clean)
