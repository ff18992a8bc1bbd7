#!/usr/bin/env bash
# The cost of cohort.torch (docs/pytorch.md): the same program
# (bench/torch/allreduce.py, gloo, 2 ranks under cohortrun, dist.all_reduce at
# 8 B and 1 MiB) without a check, with cohort.torch (python3 -m
# cohort.torch.run) and with TORCH_DISTRIBUTED_DEBUG=DETAIL, launches
# interleaved (the order rotates each round). Prints, per setting and size, the
# median over rounds of each launch's p50/p99/max per call and the ratio to no
# check. Not part of the test suite (test_torch.py runs a tiny round).
# bench/torch/overhead.py measures the check's own time per call without gloo:
#   cohortrun -n 2 python3 bench/torch/overhead.py [CALLS]
#   ROUNDS (5) ITERS (2000 calls at 8 B; 1/20 of it at 1 MiB) SIZES (8,1048576)
#   NRANKS (2; with more, cohort.torch waits for the neighbour's fingerprint
#   before each blocking call, docs/pytorch.md) SETTINGS ("none cohort detail";
#   also "presence": cohort's group and checker up, no call checked)
#   PY (python3) COHORTRUN (build/tools/cohortrun/cohortrun) OUT (a temp dir)
#   A setting LABEL=DIR runs cohort.torch from the package installed in DIR
#   (pip install --target DIR ./python) - an A/B of two versions of the check
#   in the same interleaved rounds, e.g.
#   SETTINGS="none before=/tmp/site-main after=/tmp/site-branch"
# Each launch is bracketed by bench/compare/c2c.c, the machine's core-to-core
# round trip (its median, ns; in OUT/xcore.txt), as bench/mpi/run.sh does: on
# the shared VM it moves between host states (about 55 / 140 / 550 ns) that
# scale every hand-off between the ranks, so the summary also compares each
# setting with no check over the rounds whose two launches stayed in one
# state (their four probes in one class: <90, 90-300, >=300 ns).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-2000}
SIZES=${SIZES:-8,1048576}
PY=${PY:-python3}
COHORTRUN=${COHORTRUN:-$PWD/build/tools/cohortrun/cohortrun}
OUT=${OUT:-$(mktemp -d /tmp/cohort-torch-bench.XXXXXX)}
mkdir -p "$OUT"
NRANKS=${NRANKS:-2}
read -r -a settings <<< "${SETTINGS:-none cohort detail}"
. bench/compare/hoststate.sh
hoststate_build "$OUT"
ns=${#settings[@]}
for i in $(seq 1 "$ROUNDS"); do
  for ((j = 0; j < ns; j++)); do
    s=${settings[$(((i + j) % ns))]}
    case $s in
      none) env=(COHORT_TORCH_CHECK=0) ;;
      cohort) env=(COHORT_TORCH_CHECK=1) ;;
      detail) env=(COHORT_TORCH_CHECK=0 TORCH_DISTRIBUTED_DEBUG=DETAIL) ;;
      presence) env=(COHORT_TORCH_CHECK=0 BENCH_TORCH_PRESENCE=1) ;;
      *=*) env=(COHORT_TORCH_CHECK=1 "PYTHONPATH=${s#*=}${PYTHONPATH:+:$PYTHONPATH}")
           s=${s%%=*} ;;
      *) echo "bench/torch: unknown setting $s" >&2; exit 2 ;;
    esac
    x0=$(xcore)
    env "${env[@]}" COHORT_TIMEOUT=300 "$COHORTRUN" -n "$NRANKS" "$PY" -m cohort.torch.run \
      bench/torch/allreduce.py "$ITERS" "$SIZES" > "$OUT/$s.$i.txt" 2> "$OUT/$s.$i.err" || {
      echo "bench/torch: $s round $i failed (see $OUT/$s.$i.err)" >&2; exit 1; }
    echo "$s $i $x0 $(xcore)" >> "$OUT/xcore.txt"
  done
done
PYTHONPATH=$PWD/bench/compare "$PY" - "$OUT" "$ROUNDS" "$NRANKS" "${settings[@]}" <<'PY'
import glob, os, re, statistics as S, sys
from hoststate import cls, read_xcore
out, rounds, nranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
labels = [a.split("=")[0] for a in sys.argv[4:]]
res = {}
for f in glob.glob(os.path.join(out, "*.txt")):
    s, i = os.path.basename(f).split(".")[:2]
    for line in open(f):
        m = re.search(r"RESULT (\d+) (\d+) (\S+) (\S+) (\S+) (\S+)", line)
        if m:
            b = int(m.group(1))
            res.setdefault((s, b), {})[i] = [float(m.group(k)) for k in (3, 4, 5, 6)]
sizes = sorted({b for _, b in res})
load = os.getloadavg()
print(f"gloo, {nranks} ranks, dist.all_reduce float32, {rounds} interleaved launches per setting; "
      f"load average {load[0]:.1f} at the end")
print("medians over launches of each launch's p50/p99/max per call; ratio and added time:")
print("medians over rounds of (p50 of the setting) / and - (p50 without a check)")
print(f"{'size':>9} {'setting':8} {'p50 us':>9} {'p99 us':>9} {'max us':>10} {'p50 ratio':>9} {'p50 added us':>12}")
for b in sizes:
    base = res.get(("none", b)) or res[(labels[0], b)]
    for s in labels:
        rs = res.get((s, b))
        if not rs:
            continue
        p50, p99, mx = (S.median(r[k] for r in rs.values()) for k in (0, 1, 2))
        pairs = [(rs[i][0], base[i][0]) for i in rs if i in base]
        ratio = S.median(a / c for a, c in pairs)
        added = S.median(a - c for a, c in pairs)
        print(f"{b:>9} {s:8} {p50:9.1f} {p99:9.1f} {mx:10.1f} {ratio:9.3f} {added:+12.1f}")
# Host states (bench/compare/c2c.c): a launch is in a state when both its
# probes (before, after) are in that class; a round's pair (the setting's
# launch, no check's launch) counts for a state when both launches are in it.
xc = read_xcore(os.path.join(out, "xcore.txt"), 2)
if xc:
    def state(s, i):
        v = xc.get((s, i))
        if not v:
            return None
        c = {cls(x) for x in v}
        return c.pop() if len(c) == 1 else "mixed"
    print("core-to-core round trip before/after each launch (bench/compare/c2c.c median, ns; "
          "states fast <90, mid 90-300, slow >=300; mixed: the two probes differ):")
    base_l = "none" if "none" in labels else labels[0]
    for s in labels:
        ks = [k for k in xc if k[0] == s]
        if not ks:
            continue
        cnt = {c: sum(1 for k in ks if state(*k) == c) for c in ("fast", "mid", "slow", "mixed")}
        print(f"  {s:8} median {S.median(min(xc[k]) for k in ks):.0f}..{S.median(max(xc[k]) for k in ks):.0f}; "
              f"launches " + " ".join(f"{c} {n}" for c, n in cnt.items()))
    print(f"rounds whose two launches (the setting's, {base_l}'s) stayed in one state: p50 ratio and added "
          f"as above [q1, q3], slower in")
    print(f"{'size':>9} {'setting':8} {'state':5} {'rounds':>6} {'p50 ratio':>9} {'p50 added us':>12} {'[q1, q3]':>17} {'slower':>7}")
    for b in sizes:
        base = res.get((base_l, b), {})
        for s in labels:
            if s == base_l or (s, b) not in res:
                continue
            rs = res[(s, b)]
            for c in ("fast", "mid", "slow"):
                pr = [(rs[i][0], base[i][0]) for i in rs
                      if i in base and state(s, i) == c and state(base_l, i) == c]
                if not pr:
                    continue
                ds = sorted(a - d for a, d in pr)
                qd = lambda f: ds[min(len(ds) - 1, int(f * len(ds)))]
                print(f"{b:>9} {s:8} {c:5} {len(pr):>6} {S.median(a / d for a, d in pr):9.3f} "
                      f"{S.median(ds):+12.1f} [{qd(.25):+7.1f}, {qd(.75):+7.1f}] {sum(x > 0 for x in ds):>3}/{len(pr)}")
print(f"raw: {out}")
PY
