"""Drives real multi-process jobs: cohortrun -n N <this python> ranks.py CASE.

Each rank prints lines; cohortrun prefixes them with "[rank] ". A case
passes when cohortrun exits 0 and every rank printed "OK <case>".
COHORTRUN names the launcher (default: build/tools/cohortrun/cohortrun of
this repository, else cohortrun on PATH).
"""
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
RANKS = os.path.join(HERE, "ranks.py")


def cohortrun():
    p = os.environ.get("COHORTRUN")
    if p:
        return p
    p = os.path.join(ROOT, "build", "tools", "cohortrun", "cohortrun")
    if os.access(p, os.X_OK):
        return p
    p = shutil.which("cohortrun")
    if not p:
        pytest.skip("cohortrun not built (set COHORTRUN)")
    return p


class Job:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err
        self.lines = defaultdict(list)
        for line in out.splitlines():
            m = re.match(r"^\[(\d+)\] (.*)$", line)
            if m:
                self.lines[int(m.group(1))].append(m.group(2))

    def values(self, rank, key):
        """The values of 'key value' lines of a rank."""
        return [l[len(key) + 1:] for l in self.lines[rank] if l.startswith(key + " ")]

    def __repr__(self):
        return f"rc={self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err[-6000:]}"


def job_env(extra=None):
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("COHORT_TIMEOUT", "60")
    env.pop("COHORT_STORE", None)
    if extra:
        env.update(extra)
    return env


def launch_cmd(n, case, args=(), launcher_args=()):
    return [cohortrun(), "-n", str(n), *launcher_args, sys.executable, RANKS, case, *map(str, args)]


@pytest.fixture
def run_job():
    def run(n, case, *args, env=None, timeout=180, launcher_args=(), expect_ok=True):
        cmd = launch_cmd(n, case, args, launcher_args)
        p = subprocess.run(cmd, env=job_env(env), capture_output=True, text=True, timeout=timeout)
        job = Job(p.returncode, p.stdout, p.stderr)
        if expect_ok:
            assert job.rc == 0, job
            for r in range(n):
                assert f"OK {case}" in job.lines[r], f"rank {r} did not finish {case}\n{job}"
        return job
    return run
