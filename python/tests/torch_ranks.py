"""torch.distributed programs for test_torch.py, run unchanged under the check:
cohortrun -n N python3 -m cohort.torch.run torch_ranks.py CASE [ARGS]
(COHORT_TORCH_CHECK=0: the same program without it).

"OK CASE" on every rank ends a case that completes; "DIGEST <hex>" is a
hash of every result, to compare runs with and without the check.
"""
import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


OLD = torch.__version__.startswith("1.")


def log(*a):
    # One write(2) per line: under torchrun both ranks share the test's pipe
    # and print()'s pieces (unbuffered) interleave mid-line ("DIGESTDIGEST").
    os.write(1, (" ".join(str(x) for x in a) + "\n").encode())


def correct(rank, n):
    """Every collective gloo has, sync and async, on the world and a
    sub-group; returns a digest of all results."""
    h = hashlib.sha256()
    gen = torch.Generator().manual_seed(1234 + rank)

    def rnd(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(dtype)

    def take(t):
        h.update(t.contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b"")

    dtypes = [torch.float32, torch.float64, torch.int64, torch.float16]
    if not OLD:
        dtypes.append(torch.bfloat16)  # gloo of torch 1.13 has no bfloat16
    for dt in dtypes:
        x = rnd(1000, dtype=dt) * (1 if dt.is_floating_point else 100)
        dist.all_reduce(x)
        take(x)
    for op in (dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
        x = rnd(17)
        dist.all_reduce(x, op=op)
        take(x)
    x = rnd(33)
    dist.broadcast(x, src=n - 1)
    take(x)
    x = rnd(9)
    dist.reduce(x, dst=0)
    take(x)
    xs = [torch.zeros(5) for _ in range(n)]
    dist.all_gather(xs, rnd(5))
    for t in xs:
        take(t)
    if not OLD:  # gloo of torch 1.13 has no _allgather_base
        out = torch.zeros(5 * n)
        dist.all_gather_into_tensor(out, rnd(5))
        take(out)
        out = torch.zeros(4)
        dist.reduce_scatter_tensor(out, rnd(4 * n))
        take(out)
        outs = [torch.zeros(3) for _ in range(n)]
        dist.all_to_all(outs, [rnd(3) for _ in range(n)])
        for t in outs:
            take(t)
    g = [torch.zeros(3) for _ in range(n)] if rank == 0 else None
    dist.gather(rnd(3), g, dst=0)
    if g:
        for t in g:
            take(t)
    y = torch.zeros(4)
    dist.scatter(y, [rnd(4) for _ in range(n)] if rank == n - 1 else None, src=n - 1)
    take(y)
    a2a_in = rnd(2 * n)
    a2a_out = torch.zeros(2 * n)
    dist.all_to_all_single(a2a_out, a2a_in)
    take(a2a_out)
    dist.barrier()
    # async forms: the Work's wait() returns once compared
    w = dist.all_reduce(x := rnd(64), async_op=True)
    w.wait()
    take(x)
    b = rnd(8)
    dist.broadcast(b, src=0, async_op=True).wait()
    take(b)
    # point to point in a ring
    s, r = rnd(6), torch.zeros(6)
    if rank % 2 == 0:
        dist.send(s, dst=(rank + 1) % n)
        dist.recv(r, src=(rank - 1) % n)
    else:
        dist.recv(r, src=(rank - 1) % n)
        dist.send(s, dst=(rank + 1) % n)
    take(r)
    reqs = [dist.isend(s, dst=(rank + 1) % n), dist.irecv(r, src=(rank - 1) % n)]
    for q in reqs:
        q.wait()
    take(r)
    # a sub-group of every rank but the last, and one of everyone
    sub = dist.new_group(list(range(n - 1)) if n > 2 else [0, 1])
    whole = dist.new_group()
    if rank in (list(range(n - 1)) if n > 2 else [0, 1]):
        z = rnd(12)
        dist.all_reduce(z, group=sub)
        take(z)
    z = rnd(12)
    dist.all_reduce(z, group=whole)
    take(z)
    # torch's own helpers built on the wrapped calls
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank, "pad": "x" * rank})
    h.update(repr(objs).encode())
    # multi-dimensional tensors (shapes are compared)
    x = rnd(3, 4)
    dist.all_reduce(x)
    take(x)
    if not OLD:
        beyond(rank, n, rnd, take)
    return h.hexdigest()


def ddp_model(rank, bucket_cap_mb, dtype=torch.float32):
    torch.manual_seed(0)  # the same initial model everywhere
    m = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                            torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dtype)
    return m, torch.nn.parallel.DistributedDataParallel(m, bucket_cap_mb=bucket_cap_mb)


def ddp_steps(rank, ddp, steps=3):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)  # different data per rank
    for _ in range(steps):
        opt.zero_grad()
        x = torch.randn(8, 10, generator=g).to(next(ddp.parameters()).dtype)
        ddp(x).pow(2).sum().backward()
        opt.step()


def beyond(rank, n, rnd, take):
    """torch 2.x: what does not go through torch.distributed's functions:
    DDP's gradient all-reduces (several buckets), ProcessGroup methods,
    functional collectives, batch_isend_irecv."""
    m, ddp = ddp_model(rank, 0.001)  # ~1 KiB buckets: several per step
    ddp_steps(rank, ddp)
    for p in m.parameters():
        take(p.detach())
    pg = dist.group.WORLD
    x = rnd(10)
    pg.allreduce([x]).wait()
    take(x)
    x = rnd(2, 5)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX
    pg.allreduce([x], opts).wait()
    take(x)
    b = rnd(6)
    pg.broadcast(b, 0).wait()
    take(b)
    outs = [[torch.zeros(4) for _ in range(n)]]
    pg.allgather(outs, [rnd(4)]).wait()
    for t in outs[0]:
        take(t)
    pg.barrier().wait()
    import torch.distributed._functional_collectives as fc
    y = fc.all_reduce(rnd(7), "sum", pg)
    take(y.wait() if hasattr(y, "wait") else y + 0)
    y = fc.all_gather_tensor(rnd(2, 3), 0, pg)
    take(y + 0)
    s, r = rnd(5), torch.zeros(5)
    ops = [dist.P2POp(dist.isend, s, (rank + 1) % n), dist.P2POp(dist.irecv, r, (rank - 1) % n)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    take(r)


def main():
    case = sys.argv[1]
    args = sys.argv[2:]
    if os.environ.get("TORCH_RANKS_INSTALL") == "1":
        # a program that installs the check itself (under cohort.torch.run
        # too: a second install() is the first one's, or nothing where the
        # job runs without the check)
        import cohort.torch
        cohort.torch.install()
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    odd = n - 1  # the rank that does something different
    if case == "correct":
        log("DIGEST", correct(rank, n))
        if "cohort.torch" in sys.modules and sys.modules["cohort.torch"].installed():
            st = sys.modules["cohort.torch"].checker().stats()
            log("CHECKED", st["calls"])
    elif case == "count":
        dist.all_reduce(torch.ones(8))
        dist.all_reduce(torch.ones(7 if rank == odd else 8))  # MISMATCH-LINE
    elif case == "dtype":
        dist.all_reduce(torch.ones(8, dtype=torch.float64 if rank == odd else torch.float32))
    elif case == "redop":
        dist.all_reduce(torch.ones(8), op=dist.ReduceOp.MAX if rank == odd else dist.ReduceOp.SUM)
    elif case == "root":
        dist.broadcast(torch.ones(8), src=1 if rank == odd else 0)
        dist.barrier()
    elif case == "op":
        if rank == odd:
            dist.broadcast(torch.ones(8), src=0)
        else:
            dist.all_reduce(torch.ones(8))
        dist.barrier()
    elif case == "extra":
        dist.all_reduce(torch.ones(8))
        if rank == odd:
            dist.all_reduce(torch.ones(4))  # EXTRA-LINE
        dist.all_reduce(torch.ones(8))
        dist.barrier()
    elif case == "skip":
        dist.all_reduce(torch.ones(8))
        if rank != odd:
            dist.broadcast(torch.ones(4), src=0)  # SKIPPED-LINE
        dist.all_reduce(torch.ones(8))
        dist.barrier()
    elif case == "async":
        w = dist.all_reduce(torch.ones(5 if rank == odd else 8), async_op=True)
        w.wait()
    elif case == "subgroup":
        sub = dist.new_group([0, 1])
        dist.all_reduce(torch.ones(8))
        if rank in (0, 1):
            dist.all_reduce(torch.ones(8, dtype=torch.int32 if rank == 1 else torch.float32),
                            group=sub)
        dist.barrier()
    elif case == "shape":
        dist.all_reduce(torch.ones(4, 2) if rank == odd else torch.ones(2, 4))  # SHAPE-LINE
        dist.barrier()
    elif case == "ddp":
        # the odd rank's model is in float64 (torch's own check at DDP's
        # construction compares shapes only): the reducer's first bucket
        # all-reduce (called from C++) has another type
        m, ddp = ddp_model(rank, 0.001, torch.float64 if rank == odd else torch.float32)
        ddp_steps(rank, ddp)
        dist.barrier()
    elif case == "pg":
        pg = dist.group.WORLD
        pg.allreduce([torch.ones(8)]).wait()
        pg.allreduce([torch.ones(7 if rank == odd else 8)]).wait()  # PG-LINE
        dist.barrier()
    elif case == "functional":
        import torch.distributed._functional_collectives as fc
        y = fc.all_reduce(torch.ones(3 if rank == odd else 8), "sum", dist.group.WORLD)  # FC-LINE
        log("RESULT", (y + 0).tolist())
        dist.barrier()
    elif case == "abort":
        # The odd rank's backend aborts the process on entry, as gloo does on
        # a size mismatch (std::terminate on its thread), before the check
        # can have compared the call (abort() from C, without the GIL).
        dist.all_reduce(torch.ones(8))
        if rank == odd:
            import ctypes
            libc_abort = ctypes.CDLL(None).abort
            dist.ProcessGroup.allreduce = lambda *a, **k: libc_abort()
        else:
            time.sleep(1)  # the odd rank enters first: nothing to compare with yet
        dist.all_reduce(torch.ones(7 if rank == odd else 8))  # ABORT-LINE
        dist.barrier()
    elif case == "raise":
        # The odd rank's backend raises on the mismatched call (as gloo does
        # when a peer closes the connection): the report, not the error.
        dist.all_reduce(torch.ones(8))
        if rank == odd:
            def fail(*a, **k):
                raise RuntimeError("backend: Connection closed by peer")
            dist.ProcessGroup.allreduce = fail
        else:
            time.sleep(1)
        dist.all_reduce(torch.ones(7 if rank == odd else 8))  # RAISE-LINE
        dist.barrier()
    elif case == "backend_error":
        # Matching calls whose backend fails everywhere: the backend's own
        # error reaches the program unchanged (no report, no exit).
        dist.all_reduce(torch.ones(8))
        orig = dist.ProcessGroup.__dict__["allreduce"]

        def fail(*a, **k):
            raise RuntimeError("backend: simulated failure")
        dist.ProcessGroup.allreduce = fail
        try:
            dist.all_reduce(torch.ones(8))
        except RuntimeError as e:
            log("CAUGHT", e)
        dist.ProcessGroup.allreduce = orig
        dist.all_reduce(torch.ones(8))
    elif case == "dead":
        dist.all_reduce(torch.ones(8))
        if rank == odd:
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(torch.ones(8))
        dist.barrier()
    elif case == "bind":
        # The same calls written positionally and with keywords bind to the
        # same fingerprints (the C path binds them: Checker.torch_call); the
        # odd rank writes each differently. Then a root mismatch given by
        # keyword: reported at the odd rank's call site (taken in C).
        log("PATH", type(dist.all_reduce).__name__, type(dist.send).__name__)
        t = torch.ones(8)
        odd_rank = rank == odd
        if odd_rank:
            dist.all_reduce(tensor=t, op=dist.ReduceOp.SUM)
            dist.all_reduce(t, dist.ReduceOp.MAX, None, False)
            dist.broadcast(src=0, tensor=t)
            dist.reduce(t, 0, op=dist.ReduceOp.SUM)
            dist.all_gather(tensor=t, tensor_list=[torch.zeros(8) for _ in range(n)])
            w = dist.all_reduce(t, async_op=True)
        else:
            dist.all_reduce(t)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            dist.broadcast(t, 0)
            dist.reduce(t, dst=0)
            dist.all_gather([torch.zeros(8) for _ in range(n)], t)
            w = dist.all_reduce(tensor=t, async_op=True, group=None)
        w.wait()
        dist.barrier(group=None) if odd_rank else dist.barrier()
        if rank == 0:
            dist.send(t, 1, tag=3)
        elif rank == 1:
            dist.recv(tensor=t, src=0, tag=3)
        dist.barrier()
        log("BOUND", t.tolist())
        if odd_rank:
            dist.broadcast(src=1, tensor=t)  # KW-LINE
        else:
            dist.broadcast(t, 0)
        dist.barrier()
    elif case == "stall":
        dist.all_reduce(torch.ones(8))
        if rank == odd:
            time.sleep(float(args[0]) if args else 3)
        dist.all_reduce(torch.ones(8))  # STALL-LINE
    else:
        raise SystemExit(f"unknown case {case}")
    dist.destroy_process_group()
    log("OK", case)


if __name__ == "__main__":
    main()
