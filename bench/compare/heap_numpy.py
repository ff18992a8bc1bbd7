"""bench/compare/heap_numpy.py - an unchanged numpy program's broadcast: a 1 MiB
numpy array (np.empty: numpy's own malloc) broadcast from rank 0 with the cohort
Python package, run as it is and with the shared heap (cohortrun --heap):

    cohortrun -n 2 [--heap] python3 bench/compare/heap_numpy.py [BYTES [CALLS [K]]]

K arrays (default 1) are broadcast in turn (a program with many buffers:
more than a reader keeps mapped per root). Rank 0 prints
"numpy-bcast BYTES p50_us p99_us K" (CALLS timed calls after 50 warm-up
ones; the data checked before and after)."""
import sys
import time

import numpy as np

import cohort

nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
k = int(sys.argv[3]) if len(sys.argv) > 3 else 1
g = cohort.init()
arrs = [np.empty(nbytes, dtype=np.uint8) for _ in range(k)]
want = (np.arange(nbytes, dtype=np.uint32) * 131 + 7).astype(np.uint8)
for a in arrs:
    a[:] = want if g.rank == 0 else 0
    g.broadcast(a, root=0)
    assert np.array_equal(a, want), "wrong data"
t = []
for i in range(50 + calls):
    a = arrs[i % k]
    t0 = time.perf_counter()
    g.broadcast(a, root=0)
    t.append(time.perf_counter() - t0)
for a in arrs:
    assert np.array_equal(a, want), "wrong data"
t = sorted(t[50:])
if g.rank == 0:
    print(f"numpy-bcast {nbytes} {t[len(t) // 2] * 1e6:.2f} {t[len(t) * 99 // 100] * 1e6:.2f} {k}")
g.finalize()
