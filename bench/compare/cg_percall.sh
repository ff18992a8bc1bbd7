#!/bin/bash
# bench/compare/cg_percall.sh PERF OUTDIR [OP] - instructions per call of one
# 2-rank op at 8 B, by callgrind (counts do not depend on the machine's load).
# Runs `PERF --np 2 --coll OP --sizes 8 -n N -w 100 --in-place no` under
# valgrind for N = N1 and N2 and reports, per rank, the inclusive count of
# cohort_<OP>_at divided by its calls, and (N2 run - N1 run) / (N2 - N1):
# the difference cancels start-up, warm-up and finalize. Per-function
# exclusive counts per call of the N2 run go to OUTDIR/<op>.excl.<rank>.txt.
# "without the waits": the same less the inclusive counts of the shm waits'
# entry points (spins and yields, set by the other rank's timing).
# Environment: N1 (2000), N2 (6000), ARGS (more cohort-perf options), CG
# (more valgrind options). PERF may be a wrapper that sets LD_LIBRARY_PATH.
set -euo pipefail
PERF=${1:?cohort-perf}
OUT=${2:?output folder}
OP=${3:-broadcast}
N1=${N1:-2000} N2=${N2:-6000}
mkdir -p "$OUT"
fn=cohort_${OP}_at
for n in "$N1" "$N2"; do
  d=$OUT/cg.$OP.$n
  rm -rf "$d"; mkdir -p "$d"
  valgrind --tool=callgrind --trace-children=yes ${CG:-} --callgrind-out-file="$d/cg.%p" \
    "$PERF" --np 2 --coll "$OP" --sizes 8 -n "$n" -w 100 --in-place no ${ARGS:-} >"$d/perf.txt" 2>"$d/vg.txt"
done
python3 - "$OUT" "$OP" "$N1" "$N2" "$fn" <<'PY'
import glob, os, re, subprocess, sys
out, op, n1, n2, fn = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
# the waits' entry points (src/transport/shm/shm_wait.c), none calling another: what a
# rank spins, yields or sleeps for depends on the other rank, not on its own code
WAITS = {"shm_wait_word", "shm_wait_rec", "shm_wait_multi", "shm_wait_flag"}
def ranks(n):
    """the two rank processes of a run (those that called fn), lower pid first"""
    res = []
    for f in sorted(glob.glob(os.path.join(out, f"cg.{op}.{n}", "cg.*")), key=lambda f: int(f.rsplit(".", 1)[1])):
        txt = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f],
                             capture_output=True, text=True).stdout
        incl, waits = None, 0
        for line in txt.splitlines():
            m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S+):(\S+)", line)
            if not m:
                continue
            v = int(m.group(1).replace(",", ""))
            if m.group(3) == fn and incl is None:
                incl = v
            if m.group(3) in WAITS:
                waits += v
        if incl is None:
            continue
        ex = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", f],
                            capture_output=True, text=True).stdout
        res.append((f, incl, txt, ex, waits))
    return res
r1, r2 = ranks(n1), ranks(n2)
calls = lambda n: n + 100  # -w 100 warm-up calls, then n timed
print(f"{op} 8 B, 2 ranks: inclusive instructions of {fn} per call")
for i, (a, b) in enumerate(zip(r1, r2)):
    role = "rank0" if i == 0 else "rank1"
    per_n2 = b[1] / calls(n2)
    diff = (b[1] - a[1]) / (n2 - n1)
    diffw = ((b[1] - b[4]) - (a[1] - a[4])) / (n2 - n1)
    print(f"  {role} ({os.path.basename(b[0])}): N2 run {per_n2:8.1f} /call; (N2 - N1) difference {diff:8.1f} /call; "
          f"without the waits {diffw:8.1f} /call (waits {b[4] / calls(n2):.1f} /call in the N2 run)")
    with open(os.path.join(out, f"{op}.excl.{role}.txt"), "w") as f:
        f.write(f"# {os.path.basename(b[0])}: exclusive instructions per call (/ {calls(n2)}), >= 2\n")
        for line in b[3].splitlines():
            m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)", line)
            if not m:
                continue
            v = int(m.group(1).replace(",", "")) / calls(n2)
            if v >= 2:
                f.write(f"{v:9.1f}  {m.group(2)}\n")
PY
