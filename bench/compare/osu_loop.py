#!/usr/bin/env python3
"""bench/compare/osu_loop.py - the whole OSU-style iteration, not only its timed call.

An OSU-style cell (cohort-perf --osu, mpi_coll_bench -o) times the call between two barriers
and reports the slowest rank's mean. At 2 ranks the receiver's time is mostly decided by the
barrier before it: a rank that leaves the barrier earlier than the root waits for the root's
publish inside the timed call, one that leaves later finds the data there. So the cell
compares where each library's barrier releases the root as much as the call itself. This
script runs osu_split.c (cohort) and osu_split_mpi.c (MPICH, Open MPI) - the loop { barrier;
call } with a CLOCK_MONOTONIC stamp at each step on each rank - interleaved, ROUNDS rounds,
and prints per library and cell:

  it      the whole iteration (barrier + call), p50 / mean over the root's iterations, us
  root    the root's timed call, mean, us
  leaf    the receiver's timed call, mean, us
  max     max(root, leaf): what the OSU-style cell reports
  skew    root's barrier exit - receiver's barrier exit, p50, us (negative: root leaves first)

Usage: bench/compare/osu_loop.py [OUTDIR]   (env: N=60000 iterations, ROUNDS=4,
  SIZES=8,64,256,4096 (bytes, the whole buffer as nccl-tests), OPS=bcast,scatter,
  VARIANTS=cohort,mpich,ompi, COHORT_ENV_A/COHORT_ENV_B="VAR=v ..." adds cohortA/cohortB
  variants of cohort with that environment). 2 ranks. Builds the three programs in OUTDIR
  (default a temp dir) from this checkout's build/ (libcohort) and the MPIs' mpicc.
"""
import collections
import os
import statistics as st
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get('BUILD', os.path.join(ROOT, 'build'))


def build(out):
    cc = ['cc', '-O2', '-Wall', '-I', os.path.join(ROOT, 'include'), os.path.join(HERE, 'osu_split.c'),
          '-L', BUILD, '-lcohort', '-Wl,-rpath,' + BUILD, '-o', os.path.join(out, 'coh')]
    subprocess.run(cc, check=True)
    for kind, tool in (('mpich', 'mpicc.mpich'), ('ompi', 'mpicc.openmpi')):
        subprocess.run([tool, '-O2', '-Wall', os.path.join(HERE, 'osu_split_mpi.c'), '-o',
                        os.path.join(out, kind)], check=True)


def load(pre):
    r = [[list(map(int, line.split())) for line in open(f'{pre}.{k}')] for k in (0, 1)]
    it = [r[0][i + 1][0] - r[0][i][0] for i in range(len(r[0]) - 1)]
    op = [st.mean(c - b for a, b, c in x) for x in r]
    skew = st.median(r[0][i][1] - r[1][i][1] for i in range(len(r[0])))
    return st.median(it) / 1e3, st.mean(it) / 1e3, op[0] / 1e3, op[1] / 1e3, skew / 1e3


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix='osu_loop.')
    os.makedirs(out, exist_ok=True)
    build(out)
    n = int(os.environ.get('N', '60000'))
    rounds = int(os.environ.get('ROUNDS', '4'))
    sizes = [int(x) for x in os.environ.get('SIZES', '8,64,256,4096').split(',')]
    ops = os.environ.get('OPS', 'bcast,scatter').split(',')
    run = os.path.join(BUILD, 'tools', 'cohortrun', 'cohortrun')
    var = {'cohort': [run, '-n', '2', os.path.join(out, 'coh')],
           'mpich': ['mpirun.mpich', '-n', '2', os.path.join(out, 'mpich')],
           'ompi': ['mpirun.openmpi', '--allow-run-as-root', '--bind-to', 'core', '-n', '2',
                    os.path.join(out, 'ompi')]}
    sel = os.environ.get('VARIANTS', 'cohort,mpich,ompi').split(',')
    for tag in ('A', 'B'):
        envs = os.environ.get('COHORT_ENV_' + tag)
        if envs:
            var['cohort' + tag] = ['env'] + envs.split() + var['cohort']
            sel.append('cohort' + tag)
    res = collections.defaultdict(list)
    for _ in range(rounds):
        for op in ops:
            for sz in sizes:
                for v in sel:
                    pre = os.path.join(out, 'stamps_' + v)
                    subprocess.run(var[v] + [str(n), str(sz), '1', pre, op], check=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    res[(op, sz, v)].append(load(pre))
    print(f'# osu_loop.py: 2 ranks, N={n} iterations a launch, {rounds} rounds interleaved; '
          'medians over the rounds (us): it p50/mean | root | leaf | max(root, leaf) | skew')
    for op in ops:
        for sz in sizes:
            line = f'{op:8s}{sz:9d}'
            for v in sel:
                x = res[(op, sz, v)]
                m = [st.median(t[j] for t in x) for j in range(5)]
                mx = st.median(max(t[2], t[3]) for t in x)
                line += (f' | {v}: it {m[0]:.3f}/{m[1]:.3f} root {m[2]:.3f} leaf {m[3]:.3f}'
                         f' max {mx:.3f} skew {m[4]:+.3f}')
            print(line, flush=True)


if __name__ == '__main__':
    main()
