"""Every binding, in real multi-process jobs under cohortrun (see conftest)."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import Job, job_env, launch_cmd


@pytest.mark.parametrize("n,transport", [(3, "auto"), (4, "tcp")])
def test_collectives_every_dtype_in_and_out_of_place(run_job, n, transport):
    run_job(n, "collectives", env={"COHORT_TRANSPORT": transport})


def test_async_forms_wait_test_and_dropped_work(run_job):
    job = run_job(3, "async_ops")
    for r in range(3):
        assert job.values(r, "ASYNC_ERR") == ["COHORT_ERR_CONTRACT"]


def test_split_new_group_and_finalize_order(run_job):
    run_job(4, "split")


def test_bad_buffers_refused_before_anything_moves(run_job):
    job = run_job(3, "refuse")
    refused = job.values(0, "REFUSED")
    kinds = [l.split(" ", 1)[0] for l in refused]
    assert kinds.count("ValueError") >= 8 and kinds.count("TypeError") >= 10, refused
    assert any("not contiguous" in l for l in refused)
    assert any("read-only" in l for l in refused)
    assert any("recv has 9 elements, expected 8" in l for l in refused)
    assert any("send and recv overlap" in l for l in refused)
    # the library's own checks name the Python call site
    assert any(re.search(r"InvalidArgumentError broadcast \(.*ranks\.py:\d+\): root 3", l)
               for l in refused), refused


def source_line(marker):
    src = open(os.path.join(os.path.dirname(__file__), "ranks.py")).read().splitlines()
    return next(i + 1 for i, l in enumerate(src) if marker in l)


def same_on_every_rank(job, n, key):
    vals = {r: job.values(r, key) for r in range(n)}
    for r in range(n):
        assert len(vals[r]) == 1, job
        assert vals[r] == vals[0], f"rank {r} differs: {vals}"
    return vals[0][0]


def test_contract_error_on_every_rank_names_python_call_site(run_job):
    job = run_job(3, "contract", "count")
    line = source_line("# MISMATCH-LINE")
    m = same_on_every_rank(job, 3, "MSG")
    assert f"ranks.py:{line}" in m, m
    assert "count differs: ranks 0,2 have 8, rank 1 has 4" in m, m
    f = json.loads(same_on_every_rank(job, 3, "FIELDS"))
    assert f["call"] == "all_reduce" and f["field"] == "count" and f["kind"] == "mismatch", f
    assert f["seq"] == 2 and f["culprits"] == [1], f
    assert f["values"] == {"0": "8", "1": "4", "2": "8"}, f
    assert f["file"].endswith("ranks.py") and f["line"] == line, f
    assert all(v[1] == line for v in f["sites"].values()), f
    for r in range(3):  # later calls: AbortedError carrying the cause's fields
        assert job.values(r, "AFTER") == ["COHORT_ERR_ABORTED mismatch"]


def test_contract_dtype_fields(run_job):
    job = run_job(3, "contract", "dtype")
    f = json.loads(same_on_every_rank(job, 3, "FIELDS"))
    assert f["field"] == "dtype" and f["culprits"] == [1], f
    assert f["values"] == {"0": "float32", "1": "float64", "2": "float32"}, f


def test_contract_extra_call_fields(run_job):
    job = run_job(3, "contract", "extra")
    line = source_line("# EXTRA-LINE")
    m = same_on_every_rank(job, 3, "MSG")
    assert f"ranks.py:{line}" in m, m
    f = json.loads(same_on_every_rank(job, 3, "FIELDS"))
    # with one call of history the analysis cannot prove "extra": it reports
    # the op that differs at that seq
    assert f["kind"] in ("extra", "mismatch") and f["culprits"] == [1], f
    assert f["kind"] == "extra" or f["field"] == "op", f
    assert f["values"]["1"] == "barrier" and f["values"]["0"] == "all_reduce", f
    assert f["sites"]["1"][1] == line, f


def test_abort_reaches_every_rank(run_job):
    job = run_job(3, "abort")
    for r in (0, 2):
        (v,) = job.values(r, "ABORTED")
        assert float(v.split()[0]) < 2.0, v
        assert "rank one gives up" in v


def test_abort_from_another_thread(run_job):
    job = run_job(2, "abort_thread")
    (v,) = job.values(0, "BLOCKED_FOR")
    assert float(v) < 2.5


def test_gil_released_while_blocked(run_job, tmp_path):
    job = run_job(2, "gil", tmp_path / "in_call")
    (v,) = job.values(0, "BLOCKED")
    blocked, progress = v.split()[0], v.split()[2]
    assert float(blocked) > 1.0 and int(progress) > 10000, v


def test_timeout_error(run_job):
    job = run_job(2, "timeout", env={"COHORT_TIMEOUT": "1"})
    assert job.values(0, "TIMEOUT") == ["COHORT_ERR_TIMEOUT"]


def test_peer_lost(run_job):
    job = run_job(3, "peer_lost", launcher_args=("--grace-ms", "20000"), expect_ok=False)
    assert job.rc != 0  # rank 1 exited with 7: the launcher reports the job failed
    for r in (0, 2):
        assert "OK peer_lost" in job.lines[r], job
        (v,) = job.values(r, "LOST")
        assert v.startswith("PeerLostError") or "rank 1" in v, v
    # the rank that saw the loss itself names the culprit as data; a rank told
    # by a peer's abort has the message only
    culprits = [job.values(r, "CULPRITS") for r in (0, 2)]
    assert all(c in (["[1] peer_lost"], ["[] None"]) for c in culprits), culprits
    assert ["[1] peer_lost"] in culprits, culprits


def test_store_of_the_job(run_job):
    run_job(3, "store")


def test_torch_tensors(run_job):
    pytest.importorskip("torch")
    job = run_job(2, "torch_tensors")
    assert not job.values(0, "SKIP")


def sigint_job(targets, case="sigint", n=3):
    """Starts a sigint case on n ranks, sends SIGINT to `targets` (ranks)
    once every rank is blocked; returns (job, time sent)."""
    p = subprocess.Popen(launch_cmd(n, case), env=job_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    pids, ready, out = {}, set(), []
    deadline = time.monotonic() + 60
    while len(ready) < n and time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        out.append(line)
        m = re.match(r"^\[(\d+)\] (PID (\d+)|READY)", line)
        if m and m.group(3):
            pids[int(m.group(1))] = int(m.group(3))
        elif m:
            ready.add(int(m.group(1)))
    assert len(ready) == n, "".join(out)
    time.sleep(0.5)  # into the blocking call
    sent = time.time()
    for r in targets:
        os.kill(pids[r], signal.SIGINT)
    try:
        rest, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, err = p.communicate()
        pytest.fail("the job hung after SIGINT:\n" + "".join(out) + rest + err)
    return Job(p.returncode, "".join(out) + rest, err), sent


def caught(job, r):
    (v,) = job.values(r, "CAUGHT")
    kind, t = v.split()
    return kind, float(t)


def test_sigint_to_one_rank_aborts_every_rank_within_a_second():
    job, sent = sigint_job([1])
    kind, t = caught(job, 1)
    assert kind == "KeyboardInterrupt", job
    for r in (0, 2):  # blocked in an all_reduce / in a recv from rank 0
        kind, t = caught(job, r)
        assert kind == "AbortedError", job
        assert t - sent < 1.0, (r, t - sent, job)
        assert "SIGINT" in job.values(r, "REASON")[0]
    assert job.rc == 0, job


def test_sigint_to_every_rank():
    job, sent = sigint_job([0, 1, 2])
    for r in range(3):
        kind, t = caught(job, r)
        assert kind in ("KeyboardInterrupt", "AbortedError"), job
        assert t - sent < 1.0, (r, t - sent, job)
    assert job.rc == 0, job


def test_checker_agreeing_calls(run_job):
    run_job(3, "checker", "ok")


def test_checker_mismatch_reported_on_every_rank(run_job):
    job = run_job(3, "checker", "count")
    line = source_line("seq = chk.begin(grp")
    ev = same_on_every_rank(job, 3, "EVENT")
    assert ev.startswith("backend world: all_reduce #4 ("), ev
    assert f"ranks.py:{line}" in ev, ev  # the Python caller of begin()
    assert "count differs: ranks 0,2 have 8, rank 1 has 4" in ev, ev
    for r in range(3):
        (m,) = job.values(r, "MISMATCH")
        assert m.startswith(("ContractError", "AbortedError")), m


@pytest.mark.parametrize("how", ["ok", "failraise"])
def test_checker_torch_call(run_job, how):
    """Checker.torch_call (cohort.torch's per-call path in C) without torch:
    binding, the general path, depth, the backend's error, async, detach."""
    run_job(3, "checker_torch_call", how)


def test_checker_torch_call_mismatch_names_the_keyword_call_site(run_job):
    job = run_job(3, "checker_torch_call", "mismatch")
    ev = same_on_every_rank(job, 3, "EVENT")
    assert ev.startswith("fake pg: all_reduce #8 ("), ev
    assert "count differs: ranks 0,2 have 4, rank 1 has 3" in ev, ev
    assert f"ranks.py:{source_line('# TORCHCALL-LINE')}" in ev, ev


def test_checker_begin_tensor_agreeing_calls(run_job):
    run_job(3, "checker_tensor", "ok")


@pytest.mark.parametrize("how", ["shape", "count"])
def test_checker_begin_tensor_mismatch(run_job, how):
    """begin_tensor's fingerprint: a 2-d array's shape goes into the
    arguments, a 1-d array's length into the count; the report names each
    rank's Python call site (the cached line of the same code object)."""
    job = run_job(3, "checker_tensor", how)
    ev = same_on_every_rank(job, 3, "EVENT")
    assert ev.startswith("tensor world: all_reduce #5 ("), ev
    if how == "shape":
        assert "ranks 0,2 have shape 2x4, rank 1 has shape 4x2" in ev, ev
    else:
        assert "count differs: ranks 0,2 have 8, rank 1 has 7" in ev, ev
    assert f"ranks.py:{source_line('# ODD-LINE')}" in ev, ev
    assert f"ranks.py:{source_line('# TENSOR-LINE')}" in ev, ev
    for r in range(3):
        (m,) = job.values(r, "MISMATCH")
        assert m.startswith(("ContractError", "AbortedError")), m


def test_with_block_aborts_the_group_on_an_exception(run_job):
    job = run_job(3, "with_block")
    assert job.values(1, "RAISED") == ["bad input on one rank"]
    for r in (0, 2):
        (m,) = job.values(r, "ABORTED_BY")
        assert "aborted by rank 1: ValueError raised on rank 1" in m, m


def test_group_finalized_when_collected(run_job):
    run_job(3, "no_finalize")


def test_world_made_again_in_one_process(run_job):
    run_job(3, "twice")


def test_sigint_during_init():
    job, sent = sigint_job([0, 1], case="sigint_init", n=2)
    kind, t = caught(job, 0)
    assert kind == "KeyboardInterrupt" and t - sent < 1.0, (t - sent, job)


def test_checker_exit_code_ends_every_rank():
    """exit_code: the backend is left blocked; the checker ends each
    process from C with the report and the code, and the launcher stops."""
    t0 = time.monotonic()
    p = subprocess.run(launch_cmd(3, "checker", ("exit",)), env=job_env(), capture_output=True,
                       text=True, timeout=120)
    assert time.monotonic() - t0 < 25, "the processes were not ended by the checker"
    assert p.returncode == 42, p.stdout + p.stderr
    reports = set(re.findall(r"cohort check: (.*)", p.stderr))
    assert len(reports) == 1, p.stderr  # the same report wherever it was printed
    (m,) = reports
    assert "all_reduce #4" in m and "count differs: ranks 0,2 have 8, rank 1 has 4" in m, m


def test_checker_holds_a_backend_abort_for_the_report():
    """hold_abort: rank 1 aborts (SIGABRT, as gloo does on a size mismatch)
    right after announcing its odd call; the handler holds the abort until
    the checker has the report, and every rank ends with it and exit_code,
    not with the signal (the handler's C code runs under ASan in
    scripts/test-python.sh --asan)."""
    p = subprocess.run(launch_cmd(3, "checker", ("abort",)), env=job_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 42, p.stdout + p.stderr
    assert "this process is aborting (SIGABRT): waiting for the contract check's report" \
        in p.stderr, p.stderr
    reports = set(re.findall(r"cohort check: (backend world: .*)", p.stderr))
    assert len(reports) == 1, p.stderr
    (m,) = reports
    assert "count differs: ranks 0,2 have 8, rank 1 has 4" in m, m
    assert "signal 6" not in p.stderr and "Aborted" not in p.stderr, p.stderr


def test_torch_pass_binds_and_routes_by_depth():
    """cohort.TorchPass (a ProcessGroup method in C): bound like a method, the
    original inside a checked call (depth 1), the checking wrapper outside."""
    from cohort._cohort import _torch_depth, _torch_pass, _torch_set_depth

    def orig(self, *args, **kw):
        return ("orig", self, args, kw)

    def slow(self, *args, **kw):
        return ("slow", self, args, kw)

    class PG:
        allreduce = _torch_pass(orig, slow)

    pg = PG()
    assert PG.__dict__["allreduce"].__cohort_original__ is orig
    assert PG.__dict__["allreduce"].__cohort_python__ is slow
    assert _torch_depth() == 0
    assert pg.allreduce([1], op=2) == ("slow", pg, ([1],), {"op": 2})
    _torch_set_depth(1)
    try:
        assert pg.allreduce([1], op=2) == ("orig", pg, ([1],), {"op": 2})
        assert PG.allreduce(pg, 3) == ("orig", pg, (3,), {})
    finally:
        _torch_set_depth(0)
    with pytest.raises(TypeError):
        _torch_pass(orig, 5)
