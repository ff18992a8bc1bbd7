#!/usr/bin/env python3
"""train.py - the C demo's data-parallel training (examples/train.c) in numpy.

    cohortrun -n 4 python3 examples/python/train.py [--steps 60] [--ckpt-dir DIR]
                                                    [--mismatch-at STEP] [--kill-at STEP]

Each rank generates its own shard of the same synthetic data set as the C
demo (the same splitmix64 stream, so the same numbers), computes the
gradient of the logistic loss on a mini-batch, and all-reduces gradient +
loss (average over ranks, float64) once per step, so every rank applies the
same update. Rank 0 prints the loss and writes a checkpoint every
--ckpt-every steps (temp file, fsync, rename); on start it loads the last
one and broadcasts it, so a restarted job resumes where it left off.

Failure demonstrations, as in C:
  --mismatch-at S  the last rank passes a shorter gradient at step S: every
                   rank raises cohort.ContractError with the same message
                   (naming this file's line) and exits with code 3.
  --kill-at S      rank 1 SIGKILLs itself at step S in the first incarnation;
                   under `cohortrun --max-restarts 1` the job resumes from
                   the last checkpoint under the next generation.
"""
import argparse
import math
import os
import signal
import sys

import numpy as np

import cohort

EXIT_COLLECTIVE = 3
EXIT_STOPPED = 143
MASK = (1 << 64) - 1


def splitmix64(state):
    state[0] = (state[0] + 0x9E3779B97F4A7C15) & MASK
    z = state[0]
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def unif(state):
    """Uniform in [-1, 1), the C demo's unif()."""
    return (splitmix64(state) >> 11) * 2.0 ** -52 - 1.0


def make_shard(seed, rank, samples, dim):
    s = [seed]
    wt = [3.0 * unif(s) for _ in range(dim)]
    s = [(seed * 1000003 + rank + 1) & MASK]
    x = np.empty((samples, dim))
    y = np.empty(samples)
    for i in range(samples):
        z = 0.25  # the true bias
        for j in range(dim):
            v = unif(s)
            x[i, j] = v
            z += wt[j] * v
        p = 1.0 / (1.0 + math.exp(-2.0 * z))  # label noise via the logistic
        y[i] = 1.0 if (unif(s) + 1.0) * 0.5 < p else 0.0
    return x, y


def gradient(x, y, w, first, count):
    """Mean logistic-loss gradient over rows first.. (wrapping): [weights, bias, loss]."""
    d = x.shape[1]
    rows = (first + np.arange(count)) % x.shape[0]
    xb, yb = x[rows], y[rows]
    z = xb @ w[:d] + w[d]
    e = 1.0 / (1.0 + np.exp(-z)) - yb
    g = np.empty(d + 2)
    g[:d] = e @ xb
    g[d] = e.sum()
    g[d + 1] = (np.logaddexp(0.0, z) - yb * z).sum()
    return g / count


def save_ckpt(path, step, w):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        np.save(f, np.concatenate([[float(step)], w]))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--print-every", type=int, default=10)
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--ckpt-dir")
    ap.add_argument("--mismatch-at", type=int, default=-1)
    ap.add_argument("--kill-at", type=int, default=-1)
    o = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))  # leave at a step boundary
    g = cohort.init()
    rank, size, d = g.rank, g.size, o.dim
    restart_count = int(os.environ.get("COHORT_RESTART_COUNT", "0"))
    x, y = make_shard(o.seed, rank, o.samples, d)
    # weights, bias, and a slot that carries the step in the broadcast
    w = np.zeros(d + 2)
    ckpt = os.path.join(o.ckpt_dir, "model.npy") if o.ckpt_dir else None
    if rank == 0 and ckpt:
        os.makedirs(o.ckpt_dir, exist_ok=True)
        have = os.path.exists(ckpt)
        if have:
            saved = np.load(ckpt)
            if saved.shape != (d + 2,):
                g.abort("rank 0 found an unusable checkpoint")
                g.finalize()
                return 1
            w[d + 1], w[:d + 1] = saved[0], saved[1:]
        print(f"train: generation {g.generation}, {size} ranks: "
              f"{'resuming from step %d' % w[d + 1] if have else 'starting from scratch'}",
              flush=True)
    try:
        g.broadcast(w, root=0)
        for step in range(int(w[d + 1]), o.steps):
            if stop:
                print(f"rank {rank}: SIGTERM: leaving at step {step}", file=sys.stderr)
                g.finalize()
                return EXIT_STOPPED
            if step == o.kill_at and rank == 1 % size and restart_count == 0:
                print(f"rank {rank}: --kill-at {step}: killing myself (SIGKILL)", file=sys.stderr)
                os.kill(os.getpid(), signal.SIGKILL)
            grad = gradient(x, y, w, (step * o.batch) % o.samples, o.batch)
            if step == o.mismatch_at and rank == size - 1:
                print(f"rank {rank}: --mismatch-at {step}: passing {d + 1} values instead of "
                      f"{d + 2}", file=sys.stderr)
                grad = grad[:-1]  # the bug being demonstrated
            g.all_reduce(grad, op=cohort.AVG)
            w[:d + 1] -= o.lr * grad[:d + 1]
            if rank == 0 and (step % o.print_every == 0 or step == o.steps - 1):
                print(f"step {step:4d}  loss {grad[d + 1]:.6f}", flush=True)
            if rank == 0 and ckpt and (step + 1) % o.ckpt_every == 0:
                save_ckpt(ckpt, step + 1, w[:d + 1])
        # final loss over every rank's whole shard
        loss = gradient(x, y, w, 0, o.samples)[d + 1:]
        g.all_reduce(loss, op=cohort.AVG)
        if rank == 0:
            print(f"final loss {loss[0]:.17g} after {o.steps} steps "
                  f"(generation {g.generation})", flush=True)
        g.finalize()  # collective: also reports what only a receiver saw
    except cohort.Error as e:
        print(f"rank {rank}: {type(e).__name__}: {e}", file=sys.stderr)
        g.finalize()
        return EXIT_COLLECTIVE
    return 0


if __name__ == "__main__":
    sys.exit(main())
