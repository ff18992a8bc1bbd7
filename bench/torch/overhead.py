"""The check's own time per call, without gloo's noise: 2 ranks under
cohortrun (python3 bench/torch/overhead.py [CALLS]) call cohort.torch's
all_reduce wrapper around a backend that does nothing, so each call is the
argument binding, the fingerprint, Checker.begin, Checker.end. The calls are
made with async_op=True (the Work is not waited): a do-nothing backend does
not synchronise the ranks, and a blocking call's end would wait for the
neighbour's record, which a real backend's return guarantees is there. A
barrier every 1000 calls (not timed) keeps the ranks in step. Rank 0 prints
OVERHEAD <calls> <p50 us> <p99 us> <max us> <mean us>; also the same loop
calling the do-nothing backend directly (BASE ...).
"""
import sys
import time

import torch
import torch.distributed as dist

import cohort.torch as ct


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    ct.install()
    dist.init_process_group("gloo")
    orig = dist.all_reduce.__cohort_original__

    done = object()

    def backend(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        return done if async_op else None
    backend.__signature__ = __import__("inspect").signature(orig)
    wrapped = ct._wrap_collective("all_reduce", backend)
    t = torch.ones(2, dtype=torch.float32)
    pc = time.perf_counter_ns
    for name, fn in (("BASE", backend), ("OVERHEAD", wrapped)):
        for _ in range(1000):
            fn(t, async_op=True)
        dist.barrier()
        ts = []
        for i in range(calls):
            if i % 1000 == 999:
                dist.barrier()
            t0 = pc()
            fn(t, async_op=True)
            ts.append(pc() - t0)
        ts.sort()
        if dist.get_rank() == 0:
            q = lambda f: ts[min(len(ts) - 1, int(f * len(ts)))] / 1e3  # noqa: E731
            print(f"{name} {calls} {q(0.5):.2f} {q(0.99):.2f} {ts[-1] / 1e3:.2f} "
                  f"{sum(ts) / len(ts) / 1e3:.2f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
