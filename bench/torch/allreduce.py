"""One rank of the cost benchmark (bench/torch/run.sh): times each
dist.all_reduce (gloo, float32) of every size on this rank; rank 0 prints
RESULT <bytes> <iters> <p50 us> <p99 us> <max us> <mean us>
(no reduction of the times across ranks: that would itself be a checked call;
an all_reduce keeps the two ranks in step).
BENCH_TORCH_PRESENCE=1 (run.sh's setting "presence", with COHORT_TORCH_CHECK=0):
cohort's world group and checker are up (their threads run, the default group
is registered) but torch.distributed is not wrapped - what cohort's presence
in the process costs, without any checked call.
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    sizes = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "8,1048576").split(",")]
    keep = []
    if os.environ.get("BENCH_TORCH_PRESENCE") == "1":
        import cohort
        world = cohort.init()
        chk = cohort.Checker(world)
        keep += [world, chk]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if keep:
        n = dist.get_world_size()
        keep.append(chk.add_group(cohort.Checker.group_id(0, 0, list(range(n))), list(range(n)),
                                  name="default pg"))
    for nbytes in sizes:
        t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        n = iters if nbytes <= 65536 else max(20, iters // 20)
        for _ in range(max(10, n // 10)):
            dist.all_reduce(t)
        dist.barrier()
        ts = []
        pc = time.perf_counter_ns
        for _ in range(n):
            t0 = pc()
            dist.all_reduce(t)
            ts.append(pc() - t0)
        ts.sort()
        if rank == 0:
            q = lambda f: ts[min(len(ts) - 1, int(f * len(ts)))] / 1e3  # noqa: E731
            print(f"RESULT {nbytes} {n} {q(0.5):.2f} {q(0.99):.2f} {ts[-1] / 1e3:.2f} "
                  f"{sum(ts) / len(ts) / 1e3:.2f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if keep:
        keep[1].destroy()
        keep[0].finalize()


if __name__ == "__main__":
    main()
