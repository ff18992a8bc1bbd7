#!/usr/bin/env python3
"""Interleaved A/B of start-up cost between cohort build trees (docs/performance.md,
"Start-up: libcohort without libcurl").

Usage: bench/startup/lib_ab.py [-n RUNS] LABEL=BUILD_DIR [LABEL=BUILD_DIR ...]

Each BUILD_DIR holds libcohort.so and tools/cohortrun/cohortrun. For each, builds
hello_cohort.c against that libcohort.so (dynamic, with an rpath: the README's way)
and times, in a random order per round so that load affects every variant alike:
  lone-LABEL   the program alone with RANK=bogus: it fails in cohort_init at once,
               so this is the cost of loading the library and its dependencies;
  run2-LABEL   cohortrun -n 2 of init + barrier + finalize;
and /bin/true as the floor. Prints p50/p99/max in ms.
"""
import os, random, shutil, statistics, subprocess, sys, tempfile, time

args = sys.argv[1:]
runs = 200
if len(args) >= 2 and args[0] == "-n":
    runs, args = int(args[1]), args[2:]
if not args:
    sys.exit(__doc__)
here = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(here, "hello_cohort.c")
inc = os.path.join(here, "..", "..", "include")
tmp = tempfile.mkdtemp(prefix="cohort-lib-ab.")
fail_env = {k: v for k, v in os.environ.items()
            if k not in ("COHORT_TOKEN", "COHORT_STORE", "MASTER_ADDR", "MASTER_PORT")}
fail_env.update(RANK="bogus", WORLD_SIZE="2")
cases = {"true": (["/bin/true"], fail_env, 0)}
for spec in args:
    label, bdir = spec.split("=", 1)
    bdir = os.path.abspath(bdir)
    prog = os.path.join(tmp, "hello-" + label)
    subprocess.run(["cc", "-O2", src, "-I", inc, "-L", bdir, "-lcohort",
                    "-Wl,-rpath," + bdir, "-o", prog], check=True)
    nlibs = subprocess.run(["ldd", prog], capture_output=True, text=True).stdout.count("\n")
    print(f"{label}: {prog} loads {nlibs} shared objects (ldd)")
    cases["lone-" + label] = ([prog], fail_env, 1)
    cases["run2-" + label] = ([os.path.join(bdir, "tools/cohortrun/cohortrun"), "-q", "-n", "2",
                               prog], dict(os.environ), 0)
res = {k: [] for k in cases}
for _ in range(runs):
    order = list(cases)
    random.shuffle(order)
    for k in order:
        cmd, env, want = cases[k]
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        res[k].append((time.perf_counter() - t0) * 1000)
        if rc != want:
            sys.exit(f"{k}: exit {rc}, expected {want}")
q = lambda a, p: sorted(a)[min(len(a) - 1, int(p * len(a)))]
print(f"{'case':16} {'runs':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
for k, a in res.items():
    print(f"{k:16} {len(a):5} {statistics.median(a):8.2f} {q(a, 0.99):8.2f} {max(a):8.2f}")
shutil.rmtree(tmp)
