"""Rank programs of the pytest suite: cohortrun -n N python3 ranks.py CASE [ARGS].

Every case ends by printing "OK CASE" on every rank; asserts fail the job.
"""
import array
import os
import signal
import sys
import threading
import time

import numpy as np

import cohort

CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


def log(*a):
    print(*a, flush=True)


NP_DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16,
             np.float32, np.float64]


def to_bf16(a):
    """float32 values as bfloat16 bit patterns (exact for small integers)."""
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def check_dtype(g, dt, bf16=False):
    """Every collective, in and out of place, on one dtype."""
    n, r = g.size, g.rank
    kw = {"dtype": "bfloat16"} if bf16 else {}
    if bf16:
        mk = lambda v: to_bf16(v)                          # noqa: E731
        val = lambda a: from_bf16(a).astype(np.float64)    # noqa: E731
    else:
        mk = lambda v: np.asarray(v).astype(dt)            # noqa: E731
        val = lambda a: a.astype(np.float64)               # noqa: E731
    base = np.arange(5)
    ranks_sum = n * (n - 1) // 2
    # all_reduce out of place, in place; max
    x = mk(base + r)
    y = np.zeros_like(x)
    out = g.all_reduce(x, y, **kw)
    assert out is y
    assert np.array_equal(val(y), n * base + ranks_sum), (dt, val(y))
    assert np.array_equal(val(x), base + r)  # send untouched
    z = mk(base + r)
    assert g.all_reduce(z, **kw) is z
    assert np.array_equal(val(z), n * base + ranks_sum)
    m = mk(base + r)
    g.all_reduce(m, op=cohort.MAX, **kw)
    assert np.array_equal(val(m), base + n - 1)
    m = mk(base + r)
    g.all_reduce(m, op="min", **kw)
    assert np.array_equal(val(m), base)
    # broadcast from the last rank
    b = mk(base + r)
    g.broadcast(b, root=n - 1, **kw)
    assert np.array_equal(val(b), base + n - 1)
    # reduce to rank 0, out of place and in place
    x = mk(base + r)
    y = np.zeros_like(x)
    res = g.reduce(x, y, root=0, **kw)
    if r == 0:
        assert res is y and np.array_equal(val(y), n * base + ranks_sum)
    else:
        assert res is None
    x = mk(base + r)
    g.reduce(x, root=n - 1, **kw)
    if r == n - 1:
        assert np.array_equal(val(x), n * base + ranks_sum)
    # all_gather out of place, in place
    x = mk(np.full(3, r))
    y = np.zeros(3 * n, x.dtype)
    g.all_gather(x, y, **kw)
    assert np.array_equal(val(y), np.repeat(np.arange(n), 3)), val(y)
    y = np.zeros(3 * n, x.dtype)
    y[3 * r:3 * r + 3] = mk(np.full(3, r))
    g.all_gather(None, y, **kw)
    assert np.array_equal(val(y), np.repeat(np.arange(n), 3))
    # gather to the last rank
    x = mk(np.full(2, r + 1))
    y = np.zeros(2 * n, x.dtype) if r == n - 1 else None
    res = g.gather(x, y, root=n - 1, **kw)
    if r == n - 1:
        assert np.array_equal(val(y), np.repeat(np.arange(n) + 1, 2))
    else:
        assert res is None
    # scatter from rank 0 (out of place), then in place at the root
    src = mk(np.repeat(np.arange(n) * 2, 2)) if r == 0 else None
    y = np.zeros(2, (to_bf16([0]) if bf16 else mk([0])).dtype)
    g.scatter(src, y, root=0, **kw)
    assert np.array_equal(val(y), [2 * r, 2 * r])
    if r == 0:
        src = mk(np.repeat(np.arange(n) * 3, 2))
        g.scatter(src, root=0, **kw)  # in place at the root
        assert np.array_equal(val(src)[:2], [0, 0])
    else:
        y = np.zeros(2, y.dtype)
        g.scatter(None, y, root=0, **kw)
        assert np.array_equal(val(y), [3 * r, 3 * r])
    # reduce_scatter: out of place, in place
    x = mk(np.arange(2 * n) + r)
    y = np.zeros(2, x.dtype)
    g.reduce_scatter(x, y, **kw)
    assert np.array_equal(val(y), n * np.arange(2 * r, 2 * r + 2) + ranks_sum), val(y)
    x = mk(np.arange(2 * n) + r)
    g.reduce_scatter(x, **kw)
    assert np.array_equal(val(x)[:2], n * np.arange(2 * r, 2 * r + 2) + ranks_sum)
    # all_to_all: block j of rank i holds 10*i + j
    x = mk(np.repeat(10 * r + np.arange(n), 2))
    y = np.zeros_like(x)
    g.all_to_all(x, y, **kw)
    assert np.array_equal(val(y), np.repeat(10 * np.arange(n) + r, 2)), val(y)
    g.all_to_all(x, **kw)
    assert np.array_equal(val(x), np.repeat(10 * np.arange(n) + r, 2))
    # send / recv around a ring
    x = mk(np.full(4, r))
    y = np.zeros_like(x)
    w = g.send_async(x, (r + 1) % n, tag=7, **kw)
    assert g.recv(y, (r - 1) % n, tag=7, **kw) is y
    assert w.wait() is None
    assert np.array_equal(val(y), np.full(4, (r - 1) % n))


@case
def collectives(g):
    for dt in NP_DTYPES:
        check_dtype(g, dt)
    check_dtype(g, np.uint16, bf16=True)
    # float averages, bitwise ops
    x = np.full(7, float(g.rank), np.float16)
    g.all_reduce(x, op=cohort.AVG)
    assert np.allclose(x, (g.size - 1) / 2)
    x = np.array([1 << g.rank], np.uint32)
    g.all_reduce(x, op=cohort.BOR)
    assert x[0] == (1 << g.size) - 1
    # other buffer kinds: bytearray, array.array, memoryview, a 2-d array
    ba = bytearray([g.rank + 1] * 3)
    g.all_reduce(ba, op=cohort.MAX)
    assert ba == bytearray([g.size] * 3)
    aa = array.array("d", [g.rank] * 3)
    g.all_reduce(aa)
    assert list(aa) == [g.size * (g.size - 1) / 2] * 3
    base = np.zeros(8, np.int64)
    mv = memoryview(base)[2:6]
    g.all_reduce(np.ones(4, np.int64), mv)
    assert list(base) == [0, 0] + [g.size] * 4 + [0, 0]
    m2 = np.full((3, 4), g.rank, np.float32)
    g.all_reduce(m2)
    assert (m2 == g.size * (g.size - 1) / 2).all()
    # ml_dtypes' bfloat16 arrays (no buffer protocol: through __array_interface__)
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    if ml_dtypes is not None:
        b = np.arange(6).astype(ml_dtypes.bfloat16) + g.rank
        g.all_reduce(b)
        want = np.arange(6) * g.size + g.size * (g.size - 1) // 2
        assert np.array_equal(b.astype(np.float64), want), b
        log("ML_DTYPES", b.dtype.name)
    # count 0 is legal
    g.all_reduce(np.zeros(0, np.float32))
    g.barrier()
    # the rest of the Group surface
    assert g.generation == int(os.environ.get("COHORT_GENERATION", "1"))
    assert g.last_error == "" and g.parent is None and not g.closed
    assert repr(g).startswith(f"<cohort.Group rank {g.rank} of {g.size}")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        g.trace_dump(d)
        assert any(f.endswith(".jsonl") for f in os.listdir(d)), os.listdir(d)
    assert cohort.dtype_size("bfloat16") == 2 and cohort.dtype_name(np.float32) == "float32"
    assert cohort._callsite()[0].endswith("ranks.py")


@case
def async_ops(g):
    n, r = g.size, g.rank
    x = np.full(1000, r, np.float64)
    rc0 = sys.getrefcount(x)
    w = g.all_reduce_async(x)
    assert sys.getrefcount(x) > rc0, "a pending Work holds its buffer"
    res = w.wait()
    assert res is x and w.done and w.test() is True
    del res, w
    assert sys.getrefcount(x) == rc0, "released once the Work is done and gone"
    assert (x == n * (n - 1) / 2).all()
    # test() polling
    y = np.full(10, r + 1, np.int32)
    w = g.all_reduce_async(y, op=cohort.PROD)
    while not w.test():
        time.sleep(0.001)
    assert y[0] == np.prod(np.arange(1, n + 1))
    # several in flight, completed in issue order
    bufs = [np.full(100, i + r, np.int64) for i in range(5)]
    works = [g.all_reduce_async(b) for b in bufs]
    ag = np.zeros(2 * n, np.int32)
    works.append(g.all_gather_async(np.full(2, r, np.int32), ag))
    works.append(g.broadcast_async(np.full(3, r, np.uint8), root=0))
    works.append(g.barrier_async())
    for w in reversed(works):
        w.wait()
    for i, b in enumerate(bufs):
        assert (b == n * i + n * (n - 1) // 2).all()
    assert np.array_equal(ag, np.repeat(np.arange(n), 2).astype(np.int32))
    rs = np.zeros(1, np.float32)
    g.reduce_scatter_async(np.ones(n, np.float32), rs).wait()
    assert rs[0] == n
    a2a = np.zeros(n, np.int64)
    g.all_to_all_async(np.arange(n) * 0 + r, a2a).wait()
    assert np.array_equal(a2a, np.arange(n))
    gt = np.zeros(n, np.int64) if r == 0 else None
    res = g.gather_async(np.array([r], np.int64), gt, root=0).wait()
    assert (res is None) == (r != 0)
    sc = np.zeros(1, np.int64)
    g.scatter_async(np.arange(n, dtype=np.int64) if r == 0 else None, sc, root=0).wait()
    assert sc[0] == r
    red = np.zeros(1, np.int64)
    g.reduce_async(np.array([1], np.int64), red, root=0).wait()
    assert r != 0 or red[0] == n
    # a Work dropped while pending: the group keeps the buffer alive
    big = np.full(1 << 18, 1.0, np.float32)
    g.all_reduce_async(big)  # not kept
    g.barrier()              # issue order: the all_reduce finished before this returns
    assert (big == n).all()
    # the error of a failed async call is raised by wait(); a rank that
    # issues after a peer already found the mismatch (rank 1 compares with
    # rank 0 without rank 2) gets it at issue: the group is failed by then
    try:
        w = g.all_reduce_async(np.zeros(3 if r else 4, np.float32))
    except cohort.ContractError as e:
        assert r != 0 or "count differs" in str(e), str(e)
        log("ASYNC_ERR", e.status_name)
        return
    try:
        w.wait()
        raise AssertionError("mismatched async call did not fail")
    except cohort.ContractError as e:
        log("ASYNC_ERR", e.status_name)
    try:
        w.wait()
        raise AssertionError("second wait did not raise again")
    except cohort.ContractError:
        pass


@case
def split(g):
    n, r = g.size, g.rank
    sub = g.split(r % 2, key=-r)  # reversed order inside each color
    members = [i for i in range(n) if i % 2 == r % 2]
    assert sub.size == len(members)
    assert sub.rank == len(members) - 1 - members.index(r), (sub.rank, members)
    assert sub.parent is g
    x = np.array([r], np.int64)
    sub.all_reduce(x)
    assert x[0] == sum(members)
    none = g.split(cohort.UNDEFINED if r == 0 else 1)
    assert (none is None) == (r == 0)
    pair = g.new_group([n - 1, 0])
    if r in (0, n - 1):
        assert pair.size == 2 and pair.rank == (0 if r == n - 1 else 1)
        y = np.array([r], np.int32)
        pair.all_reduce(y)
        assert y[0] == n - 1
    else:
        assert pair is None
    # finalizing the world finalizes the live sub-groups first
    g.barrier()
    g.finalize()
    assert sub.closed and g.closed
    try:
        sub.all_reduce(x)
        raise AssertionError("a finalized group accepted a call")
    except cohort.InvalidArgumentError as e:
        assert "finalized" in str(e)


@case
def refuse(g):
    """Bad buffers are refused before anything moves: rank 0 makes every
    mistake, then all ranks run one call that must still line up."""
    r = g.rank
    if r == 0:
        def expect(exc, fn, *a, **k):
            try:
                fn(*a, **k)
            except exc as e:
                log("REFUSED", type(e).__name__, e)
                return
            raise AssertionError(f"{fn.__name__}{a} was not refused")
        f = np.zeros(8, np.float32)
        expect(ValueError, g.all_reduce, np.zeros(16, np.float32)[::2])          # strided
        expect(ValueError, g.all_reduce, np.zeros((4, 4), np.float32).T)        # Fortran order
        expect(TypeError, g.all_reduce, f, bytes(32))                           # read-only recv
        ro = np.zeros(8, np.float32)
        ro.flags.writeable = False
        expect(TypeError, g.all_reduce, ro)                                     # in place, read-only
        expect(TypeError, g.broadcast, ro, root=1)                              # written off the root
        expect(ValueError, g.all_reduce, f, np.zeros(9, np.float32))            # size
        ov = np.zeros(16, np.float32)
        expect(ValueError, g.all_reduce, ov[:8], ov[4:12])                     # overlap
        expect(TypeError, g.all_reduce, f, np.zeros(8, np.float64))             # dtype
        expect(TypeError, g.all_reduce, np.zeros(4, np.int16))                  # no int16
        expect(TypeError, g.all_reduce, np.zeros(4, np.complex64))
        expect(TypeError, g.all_reduce, np.zeros(4, np.bool_))
        expect(TypeError, g.all_reduce, np.zeros(4, ">f4"))                     # big-endian
        expect(TypeError, g.all_reduce, [1.0, 2.0])                             # no buffer
        expect(TypeError, g.all_reduce, None)
        expect(TypeError, g.all_reduce, f, dtype="complex")
        expect(TypeError, g.all_reduce, f, op="mean")
        expect(TypeError, g.all_reduce, np.zeros(3, np.float64), dtype="float32")  # 8 != 4
        expect(ValueError, g.all_reduce, bytearray(3), dtype="float32")          # 3 bytes
        expect(ValueError, g.all_gather, f, np.zeros(8 * g.size + 1, np.float32))
        expect(ValueError, g.all_gather, None, np.zeros(8 * g.size + 1, np.float32))
        expect(ValueError, g.reduce_scatter, np.zeros(g.size + 1, np.float32))
        expect(ValueError, g.all_to_all, np.zeros(g.size + 1, np.float32))
        expect(ValueError, g.scatter, np.zeros(g.size * 2 + 1, np.float32), np.zeros(2, np.float32))
        expect(TypeError, g.gather, f, None, root=0)                           # root needs recv
        # the library's own argument checks: local, the group stays usable
        expect(cohort.InvalidArgumentError, g.broadcast, f, root=g.size)
        expect(cohort.InvalidArgumentError, g.send, f, r)                      # to itself
        expect(cohort.InvalidArgumentError, g.all_reduce, np.zeros(2, np.float32), op=cohort.BAND)
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            expect(ValueError, g.all_reduce, torch.zeros(4, 4).t())
            expect(TypeError, g.all_reduce, torch.zeros(4, dtype=torch.complex64))
            expect(TypeError, g.all_reduce, torch.zeros(4, dtype=torch.int16))
    x = np.array([r + 1], np.int64)
    g.all_reduce(x)
    assert x[0] == g.size * (g.size + 1) // 2


def mismatch_call(g, count):
    # the call site the contract must name is this line
    return g.all_reduce(np.zeros(count, np.float32))  # MISMATCH-LINE


def extra_call(g):
    return g.barrier()  # EXTRA-LINE


@case
def contract(g, how="count"):
    """Rank 1 makes a different call: a ContractError on every rank, with
    the same message and the same structured fields."""
    import json
    g.barrier()
    try:
        if how == "count":
            mismatch_call(g, 4 if g.rank == 1 else 8)
        elif how == "dtype":
            g.all_reduce(np.zeros(8, np.float64 if g.rank == 1 else np.float32))
        elif how == "extra":
            if g.rank == 1:
                extra_call(g)
            for _ in range(3):
                g.all_reduce(np.zeros(8, np.float32))
        raise AssertionError("mismatch not detected")
    except cohort.ContractError as e:
        assert isinstance(e, cohort.Error)
        assert e.status == 2 and e.status_name == "COHORT_ERR_CONTRACT"
        assert e.message == str(e)
        log("MSG", e.message)
        log("FIELDS", json.dumps({f: getattr(e, f) for f in
                                  ("call", "seq", "field", "kind", "culprits", "values", "sites",
                                   "file", "line")}))
    try:
        g.barrier()
        raise AssertionError("a poisoned group accepted a call")
    except cohort.AbortedError as e:
        log("AFTER", e.status_name, e.kind)


@case
def abort(g):
    """Rank 1 aborts while the others wait in an all_reduce."""
    if g.rank == 1:
        time.sleep(0.3)
        g.abort("rank one gives up")
    t0 = time.monotonic()
    try:
        g.all_reduce(np.zeros(4, np.float32))
        raise AssertionError("not aborted")
    except cohort.AbortedError as e:
        assert "rank one gives up" in str(e), str(e)
        log("ABORTED", round(time.monotonic() - t0, 3), e)


@case
def abort_thread(g):
    """Another thread of rank 0 aborts the group rank 0 is blocked in."""
    if g.rank == 0:
        threading.Timer(0.5, g.abort, args=("from a helper thread",)).start()
        t0 = time.monotonic()
        try:
            g.all_reduce(np.zeros(4, np.float32))  # rank 1 never joins
            raise AssertionError("not aborted")
        except cohort.AbortedError as e:
            dt = time.monotonic() - t0
            assert "from a helper thread" in str(e)
            assert dt < 2.5, dt
            log("BLOCKED_FOR", round(dt, 3))
    else:
        # rank 1 joins later: its call fails at once with the cause
        time.sleep(2)
        try:
            g.all_reduce(np.zeros(4, np.float32))
            raise AssertionError("not aborted")
        except cohort.AbortedError as e:
            assert "from a helper thread" in str(e), str(e)


@case
def gil(g, in_call):
    """A Python thread makes progress while the main thread is blocked."""
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1
    second = []

    def issue_from_another_thread():
        try:
            g.barrier()
        except cohort.InvalidArgumentError as e:
            second.append(str(e))
    # Rank 1 starts its 1.5 s only once rank 0 is about to block (the file
    # in_call): a fixed sleep on both sides let a rank 0 that came out of
    # init late block for less than the 1 s asserted.
    def wait_in_call():
        deadline = time.monotonic() + 60
        while not os.path.exists(in_call):
            assert time.monotonic() < deadline, "rank 0 never reached its call"
            time.sleep(0.01)

    def second_thread():
        wait_in_call()
        time.sleep(0.3)  # the main thread is in all_reduce by now
        issue_from_another_thread()
    if g.rank == 0:
        t = threading.Thread(target=spin)
        t.start()
        # a second thread issuing on the group while the main thread is in a
        # call is refused locally (calls on a group: one thread at a time)
        t2 = threading.Thread(target=second_thread)
        t2.start()
        time.sleep(0.1)
        c0 = counter[0]
        t0 = time.monotonic()
        open(in_call, "w").close()
        g.all_reduce(np.zeros(4, np.float32))  # rank 1 arrives >= 1.5 s later
        blocked = time.monotonic() - t0
        progressed = counter[0] - c0
        stop.set()
        t.join()
        t2.join()
        log("BLOCKED", round(blocked, 3), "PROGRESS", progressed)
        assert blocked > 1.0, blocked
        assert progressed > 10000, progressed
        assert len(second) == 1 and "another thread is issuing" in second[0], second
    else:
        wait_in_call()
        time.sleep(1.5)
        g.all_reduce(np.zeros(4, np.float32))
    # the same for Work.wait and a store wait
    w = g.barrier_async()
    w.wait()


def with_block():
    """The with-statement form, as a program would write it."""
    with cohort.init() as g:
        if g.rank == 1:
            raise ValueError("bad input on one rank")
        try:
            g.all_reduce(np.zeros(4, np.float32))
            raise AssertionError("not aborted")
        except cohort.AbortedError as e:
            assert "ValueError raised on rank 1: bad input on one rank" in str(e), str(e)
            log("ABORTED_BY", e)
    assert g.closed


def no_finalize():
    """A program that never finalizes: the group is finalized when collected."""
    g = cohort.init()
    x = np.ones(4)
    g.all_reduce(x)
    assert x[0] == g.size
    log("OK no_finalize")


def twice():
    """Two with-blocks, as a script in two phases would write them: the
    second cohort.init() makes the job's world again (session 38: it failed
    "joined group 0 twice" on a store that outlives the first)."""
    for k in range(3):
        with cohort.init() as g:
            x = np.full(4, g.rank + k, np.float32)
            g.all_reduce(x)
            assert x[0] == g.size * (g.size - 1) / 2 + g.size * k, (k, x)


def sigint_init():
    """Rank 0 waits in cohort.init() for rank 1, which does not come:
    Ctrl-C there raises KeyboardInterrupt at once."""
    log("PID", os.getpid())
    try:
        if os.environ["RANK"] == "1":
            log("READY")
            time.sleep(60)
            return
        log("READY")
        cohort.init()
        raise AssertionError("init returned")
    except KeyboardInterrupt:
        log("CAUGHT KeyboardInterrupt", repr(time.time()))
    log("OK sigint_init")


@case
def timeout(g):
    """COHORT_TIMEOUT=1: rank 0 waits alone and gets CohortTimeoutError."""
    if g.rank == 0:
        try:
            g.all_reduce(np.zeros(4, np.float32))
            raise AssertionError("no timeout")
        except cohort.CohortTimeoutError as e:
            assert isinstance(e, TimeoutError)
            log("TIMEOUT", e.status_name)
    else:
        time.sleep(3)
        try:
            g.all_reduce(np.zeros(4, np.float32))
        except cohort.Error as e:
            log("LATE", e.status_name)


@case
def peer_lost(g):
    """Rank 1 dies; the others get PeerLostError (cohortrun's SIGTERM is
    ignored here so the survivors can report)."""
    signal.signal(signal.SIGTERM, lambda *a: None)
    g.barrier()
    if g.rank == 1:
        os._exit(7)
    try:
        g.all_reduce(np.zeros(4, np.float32))
        raise AssertionError("peer loss not detected")
    except (cohort.PeerLostError, cohort.AbortedError) as e:
        log("LOST", type(e).__name__, e)
        log("CULPRITS", e.culprits, e.kind)


@case
def sigint(g, who="1"):
    """Block; the test sends SIGINT (to rank `who` or to every rank).
    Ranks 0 and 1 block in an all_reduce (rank 0 in Work.wait of its async
    form), rank 2 in a recv from rank 0."""
    # With SIGINT sent to every rank, this rank's own signal may land after
    # a peer's abort already ended the call - even inside the except clause
    # that handles the AbortedError, where a second KeyboardInterrupt would
    # escape (a Python handler runs at any bytecode boundary). So only the
    # first SIGINT raises; later ones are counted. The library wraps this
    # handler as it wraps Python's default one (python/src/interrupt.c).
    hits = [0]

    def on_sigint(signum, frame):
        hits[0] += 1
        if hits[0] == 1:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    log("PID", os.getpid())
    outcome = None
    try:
        try:
            log("READY")
            if g.rank == 0:  # blocked in Work.wait
                g.all_reduce_async(np.zeros(4, np.float32)).wait()
            elif g.rank == 1:
                g.all_reduce(np.zeros(4, np.float32))
            else:
                g.recv(np.zeros(4, np.float32), 0)
            raise AssertionError("the call returned")
        except cohort.AbortedError as e:
            outcome = ("AbortedError", time.time(), str(e))
        time.sleep(0.3)  # this rank's own signal, if still on its way
    except KeyboardInterrupt:  # raised once at most: nothing interrupts this
        if outcome is None:
            outcome = ("KeyboardInterrupt", time.time(), "")
    kind, t, reason = outcome
    log("CAUGHT", kind, repr(t))
    if reason:
        log("REASON", reason)


@case
def store(g):
    """The job's own store (cohortrun's) through cohort.Store."""
    s = cohort.Store(os.environ["COHORT_STORE"], os.environ["COHORT_JOB_ID"],
                     os.environ["COHORT_TOKEN"])
    s.set(f"py/{g.rank}", str(g.rank).encode())
    s.wait([f"py/{i}" for i in range(g.size)], timeout=30)
    assert s.get(f"py/{(g.rank + 1) % g.size}") == str((g.rank + 1) % g.size).encode()
    assert sorted(s.list("py/")) == sorted(f"py/{i}" for i in range(g.size))
    total = s.add("py-counter", g.rank + 1)
    assert 1 <= total <= g.size * (g.size + 1) // 2
    s.barrier("py-barrier", g.size, timeout=30)
    assert s.add("py-counter", 0) == g.size * (g.size + 1) // 2
    s.close()


@case
def checker(g, how="ok"):
    """cohort.Checker over a "backend" group (a cohort sub-group playing
    another library): fingerprints announced around each backend call."""
    backend = g.split(0)  # before the checker borrows the world
    events = []

    def handler(kind, st, text):
        events.append((kind, st, text))

    def abort_backend(kind, st, text):
        # the front end's part: no rank may stay blocked in the backend
        backend.abort("checker: " + text)
    if how in ("exit", "abort"):
        # no Python at all after the failure: the report on stderr, _exit(42)
        chk = cohort.Checker(g, exit_code=42)
        if how == "abort":
            chk.hold_abort(20.0)
    else:
        chk = cohort.Checker(g, handler=handler, abort=abort_backend)
    ranks = list(range(g.size))
    gid = cohort.Checker.group_id(0, 0, ranks)
    assert gid == cohort.Checker.group_id(0, 0, ranks) and gid != cohort.Checker.group_id(0, 1, ranks)
    grp = chk.add_group(gid, ranks, name="backend world")
    assert grp.size == g.size and grp.index == g.rank
    try:
        g.finalize()
        raise AssertionError("finalized a group a Checker borrows")
    except cohort.InvalidArgumentError:
        pass
    failed_at = None
    if how == "abort":
        begun = cohort.Store(os.environ["COHORT_STORE"], os.environ["COHORT_JOB_ID"],
                             os.environ["COHORT_TOKEN"])
    for i in range(6):
        count = 4 if (how in ("count", "exit", "abort") and i == 3 and g.rank == 1) else 8
        if how == "abort" and i == 3 and g.rank != 1:
            # rank 1 first in: its begin has nothing to compare yet (it says
            # so in the job's store; a fixed sleep here let a rank 1 that ran
            # late compare, fail with ContractError and never abort)
            begun.wait(["py-abort-begun"], timeout=60)
        try:
            seq = chk.begin(grp, "all_reduce", count, sig="float32", redop="sum")
            assert seq == i + 1
            if count == 4 and how == "abort":
                begun.set("py-abort-begun", b"1")
                # as gloo does on a size mismatch before the check compared
                # the call: the abort is held until the report is out
                os.abort()
            x = np.ones(8, np.float32)
            backend.all_reduce(x)  # CHECKED-LINE
            chk.end(grp, seq, synced=True)
        except (cohort.ContractError, cohort.AbortedError) as e:
            failed_at = i
            log("MISMATCH", type(e).__name__, e)
            break
    if how in ("exit", "abort"):
        time.sleep(30)  # the checker ends this process
        raise AssertionError("exit_code did not end the process")
    if how == "ok":
        assert failed_at is None
        chk.close(timeout=30)
        st = chk.stats()
        assert st["calls"] == 6 and st["compared"] == 6, st
        assert not events and chk.status == 0
    else:
        assert failed_at is not None and failed_at >= 3, failed_at
        deadline = time.monotonic() + 20
        while not events and time.monotonic() < deadline:
            time.sleep(0.05)
        kinds = [k for k, _, _ in events]
        assert kinds == [cohort.CHECK_MISMATCH], events
        log("EVENT", events[0][2])
        assert chk.status == 2
    chk.destroy()
    for grp_ in (backend, g):
        try:
            grp_.finalize()
        except cohort.Error as e:
            assert how != "ok", e


@case
def checker_tensor(g, how="ok"):
    """Checker.begin_tensor (the fingerprint read from an array's shape and
    dtype in C) and Checker.finish (wait + end in one call), as
    cohort.torch calls them; numpy arrays stand in for tensors."""
    backend = g.split(0)
    events = []
    chk = cohort.Checker(g, handler=lambda k, s, t: events.append((k, s, t)),
                         abort=lambda k, s, t: backend.abort("checker: " + t))
    ranks = list(range(g.size))
    grp = chk.add_group(cohort.Checker.group_id(0, 0, ranks), ranks, name="tensor world")
    # not an array: nothing begun (the caller takes its Python path)
    assert chk.begin_tensor(grp, "all_reduce", object(), "SUM", -1) is None
    assert chk.begin_tensor(grp, "all_reduce", np.ones(3, np.float32), None, -1) == 1
    chk.finish(grp, 1, 0)
    failed_at = None
    for i in range(2, 8):
        x = np.ones((2, 4), np.float32)
        try:
            if i == 5 and g.rank == 1 and how != "ok":
                y = x.reshape(4, 2) if how == "shape" else np.ones(7, np.float32)
                seq = chk.begin_tensor(grp, "all_reduce", y, "SUM", -1)  # ODD-LINE
            else:
                seq = chk.begin_tensor(grp, "all_reduce", x, "SUM", -1)  # TENSOR-LINE
            assert seq == i, (seq, i)
            backend.all_reduce(np.ones(8, np.float32))
            chk.finish(grp, seq, 1 if i % 2 else 2)
        except (cohort.ContractError, cohort.AbortedError) as e:
            failed_at = i
            log("MISMATCH", type(e).__name__, e)
            break
    if how == "ok":
        assert failed_at is None
        chk.close(timeout=30)
        st = chk.stats()
        assert st["calls"] == 7 and st["compared"] == 7, st
        assert not events and chk.status == 0
    else:
        assert failed_at is not None and failed_at >= 5, failed_at  # 6: compared by then
        deadline = time.monotonic() + 20
        while not events and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [k for k, _, _ in events] == [cohort.CHECK_MISMATCH], events
        log("EVENT", events[0][2])
    chk.destroy()
    for grp_ in (backend, g):
        try:
            grp_.finalize()
        except cohort.Error as e:
            assert how != "ok", e


class _FakeTorchState:
    """What Checker.torch_call reads of cohort.torch's _State."""

    def __init__(self, cg):
        self.groups, self.default_cg, self.redops = {}, cg, []

    def group_for(self, pg):
        return self.default_cg if pg is None else self.groups.get(pg)

    def redop(self, op):
        self.redops.append(op)
        return str(op).upper()

    def group_rank(self, pg, w):
        return w


@case
def checker_torch_call(g, how="ok"):
    """Checker.torch_call, cohort.torch's per-call path in C, without torch
    (numpy arrays stand in for tensors): positional and keyword binding,
    what goes to the general path, the nesting depth, the backend's
    exception, async, detach, and the call site of a mismatch."""
    from cohort._cohort import _torch_depth
    backend = g.split(0)
    events = []
    chk = cohort.Checker(g, handler=lambda k, s, t: events.append((k, s, t)),
                         abort=lambda k, s, t: backend.abort("checker: " + t))
    ranks = list(range(g.size))
    cg = chk.add_group(cohort.Checker.group_id(0, 0, ranks), ranks, name="fake pg")
    st = _FakeTorchState(cg)
    seen, slow_calls, failed = [], [], []

    def all_reduce(tensor, op=None, group=None, async_op=False):
        seen.append((_torch_depth(), op, async_op))
        if isinstance(op, str) and op == "boom":
            raise RuntimeError("backend failed")
        backend.all_reduce(tensor)
        return "work" if async_op else None

    def slow(*a, **k):
        slow_calls.append((a, k))
        return "slow"

    def on_failed(state, grp, seq):
        failed.append(seq)
        if how == "failraise":
            raise cohort.InvalidArgumentError("the report")

    names = ("tensor", "op", "group", "async_op")
    c = chk.torch_call(all_reduce, slow, st, "tensor", "all_reduce", names, 4,
                       {"tensor": 0, "op": 1, "group": 2, "async_op": 3}, -1, True, True,
                       np.ndarray, lambda w, grp, seq: ("checked", w, seq), on_failed)
    x = np.ones(4, np.float32)
    assert c(x) is None and c(tensor=x) is None and c(x, None, None, False) is None
    assert c(x, op="sum") is None and c(op="sum", tensor=x) is None
    assert st.redops == ["sum"], st.redops  # cached per op object
    assert chk.stats()["calls"] == 5 and all(d == 1 for d, _, _ in seen) and _torch_depth() == 0
    # not bound here: to the general path, nothing begun
    assert c(x, bogus=1) == "slow" and c(x, tensor=x) == "slow" and c([1.0]) == "slow"
    assert c(x, None, None, False, 5) == "slow" and len(slow_calls) == 4
    assert chk.stats()["calls"] == 5
    # async: the Work is wrapped with the call's number
    assert c(x, async_op=True) == ("checked", "work", 6)
    chk.wait(cg, 6)  # what CheckedWork.wait does
    # the backend raises: failed(state, group, seq), then the backend's error
    try:
        c(x, "boom")
        raise AssertionError("no exception")
    except RuntimeError as e:
        assert how != "failraise" and str(e) == "backend failed", e
    except cohort.InvalidArgumentError as e:
        assert how == "failraise" and isinstance(e.__context__, RuntimeError), e
    assert failed == [7] and _torch_depth() == 0
    # a mismatch given by keyword: the call site is this file's line
    if how == "mismatch":
        try:
            if g.rank == 1:
                c(tensor=np.ones(3, np.float32))  # TORCHCALL-LINE
            else:
                c(x)
            raise AssertionError("no report")
        except (cohort.ContractError, cohort.AbortedError) as e:
            log("MISMATCH", type(e).__name__)
        deadline = time.monotonic() + 20
        while not events and time.monotonic() < deadline:
            time.sleep(0.05)
        log("EVENT", events[0][2])
    else:
        c.detach()
        n = chk.stats()["calls"]
        assert c(x) is None and chk.stats()["calls"] == n  # straight to the function
        chk.close(timeout=30)
        assert not events and chk.status == 0
    assert c.__cohort_original__ is all_reduce
    chk.destroy()
    for grp_ in (backend, g):
        try:
            grp_.finalize()
        except cohort.Error as e:
            assert how == "mismatch", e


@case
def torch_tensors(g):
    try:
        import torch
    except ImportError:
        log("SKIP torch not installed")
        return
    n, r = g.size, g.rank
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
               torch.int32, torch.uint8, torch.int8):
        t = torch.arange(6, dtype=dt) + r
        g.all_reduce(t)
        assert torch.equal(t, (torch.arange(6) * n + n * (n - 1) // 2).to(dt)), (dt, t)
        out = torch.zeros(6 * n, dtype=dt)
        g.all_gather(torch.full((6,), r, dtype=dt), out)
        assert torch.equal(out, torch.arange(n).repeat_interleave(6).to(dt))
    # out of place between a tensor and a numpy array of the same dtype
    y = np.zeros(3, np.float32)
    g.all_reduce(torch.ones(3), y)
    assert (y == n).all()
    # an input that requires grad is read through a detached view
    p = torch.ones(4, requires_grad=True)
    o = torch.zeros(4)
    g.all_reduce(p, o)
    assert torch.equal(o, torch.full((4,), float(n)))
    # a slice of a tensor (offset, contiguous) and a 2-d tensor
    big = torch.zeros(10)
    g.all_reduce(torch.ones(4), big[3:7])
    assert big.tolist() == [0, 0, 0] + [float(n)] * 4 + [0, 0, 0]
    m = torch.full((2, 3), float(r))
    g.broadcast(m, root=n - 1)
    assert torch.equal(m, torch.full((2, 3), float(n - 1)))
    w = g.all_reduce_async(torch.ones(1000, dtype=torch.bfloat16))
    assert torch.equal(w.wait(), torch.full((1000,), float(n), dtype=torch.bfloat16))


def main():
    name = sys.argv[1]
    if name == "sigint_init":
        return sigint_init()
    if name in ("with_block", "no_finalize", "twice"):  # they make their own group
        try:
            globals()[name]()
        except ValueError as e:
            log("RAISED", e)
            log("OK", name)
            return
        if name in ("with_block", "twice"):
            log("OK", name)
        return
    fn = CASES[name]
    g = cohort.init()
    fn(g, *sys.argv[2:])
    if not g.closed:
        try:
            g.finalize()
        except cohort.Error as e:
            log("FINALIZE", type(e).__name__, e)
    log("OK", name)


if __name__ == "__main__":
    main()
