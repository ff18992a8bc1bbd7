# cgsum.py OUT OP N1 N2: per rank, per call (N2-N1 difference) inclusive of cohort_<op>_at,
# less the shm waits, and less also the recorder's clock reads (coh_trace_us, coh_trace_us_slow:
# under valgrind the TSC extrapolation never engages and they fall back to clock_gettime and
# anchor renewals whose count varies with valgrind's timing)
import glob, os, re, subprocess, sys
out, op, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fn = f"cohort_{op}_at"
WAITS = {"shm_wait_word", "shm_wait_rec", "shm_wait_multi", "shm_wait_flag"}
CLOCK = {"coh_trace_us", "coh_trace_us_slow"}
def ranks(n):
    res = []
    for f in sorted(glob.glob(os.path.join(out, f"cg.{op}.{n}", "cg.*")), key=lambda f: int(f.rsplit(".", 1)[1])):
        txt = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f], capture_output=True, text=True).stdout
        incl, w, c = None, 0, 0
        for line in txt.splitlines():
            m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S+):(\S+)", line)
            if not m: continue
            v = int(m.group(1).replace(",", ""))
            if m.group(3) == fn and incl is None: incl = v
            if m.group(3) in WAITS: w += v
            if m.group(3) in CLOCK: c += v
        if incl is not None: res.append((incl, w, c))
    return res
a, b = ranks(n1), ranks(n2)
for i, (x, y) in enumerate(zip(a, b)):
    d = lambda k: (y[k] - x[k]) / (n2 - n1)
    print(f"{op:10s} rank{i}: incl {d(0):7.1f}  less waits {d(0)-d(1):7.1f}  less waits and clock {d(0)-d(1)-d(2):7.1f}  (clock {d(2):5.1f})")
