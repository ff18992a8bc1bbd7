#!/usr/bin/env python3
"""bench/compare/contract_ab.sh --summarize on a synthetic run (no timing): four rounds of
cohort-perf --percentiles output, on and off, with c2c lines. Checks the table's pair
count, the median of the pairs' p50 and p99 ratios, the pairs that went each way, the
split by host state (a pair is far when either launch's c2c read >= 200 ns), and the
c2c line (a launch whose c2c got no batch reads '-').
Usage: contract_ab_check.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

src = sys.argv[1]
script = os.path.join(src, "bench", "compare", "contract_ab.sh")
fails = []


def expect(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


HEAD = ("# Collective: all_reduce\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "      p50      p99      max\n")


def launch(path, c2c, p50, p99):
    with open(path, "w") as f:
        f.write("# load before: 1.00 1.00 1.00\n")
        f.write(f"# c2c before: c2c 0 1 {c2c} 80 70 100\n")
        f.write(HEAD)
        f.write(f"     4194304       1048576     float     sum      -1   {p50:.2f}    7.00    7.00"
                f"       0  {p50:.2f}  {p99:.2f}  {p99 * 2:.2f}\n")
        f.write("# c2c after: c2c 0 1 - - - 0\n")
        f.write("# load after: 1.00 1.00 1.00\n")


with tempfile.TemporaryDirectory() as out:
    # round: (c2c on, p50 on, p99 on), (c2c off, p50 off, p99 off)
    rounds = {1: ((90, 110.0, 200.0), (95, 100.0, 100.0)),    # near, on slower x1.1
              2: ((100, 90.0, 100.0), (90, 100.0, 100.0)),    # near, on faster x0.9
              3: ((450, 120.0, 100.0), (100, 100.0, 100.0)),  # far (on's c2c), on slower x1.2
              4: ((80, 105.0, 100.0), (85, 100.0, 100.0))}    # near, on slower x1.05
    for r, (on, off) in rounds.items():
        launch(os.path.join(out, f"on.{r}.txt"), *on)
        launch(os.path.join(out, f"off.{r}.txt"), *off)
    with open(os.path.join(out, "info.txt"), "w") as f:
        f.write("# synthetic\n")
    p = subprocess.run(["bash", script, "--summarize", out], capture_output=True, text=True)
    print(p.stdout, p.stderr)
    expect(p.returncode == 0, f"--summarize exits 0 (got {p.returncode})")
    rows = [l for l in p.stdout.splitlines() if l.startswith("| all_reduce | 4194304 |")]
    expect(len(rows) == 1, "one row for all_reduce 4194304")
    if rows:
        c = [x.strip() for x in rows[0].strip("|").split("|")]
        expect(c[2] == "4", f"4 pairs (got {c[2]})")
        expect(c[3] == "1.075", f"p50 on/off median of pairs 1.075 (got {c[3]})")
        expect(c[4] == "1.000", f"p99 on/off median of pairs 1.000 (got {c[4]})")
        expect(c[5] == "3/1", f"pairs on slower/faster 3/1 (got {c[5]})")
        expect(c[8] == "1.050, 2/1 (3)", f"near pairs 1.050, 2/1 (3) (got {c[8]})")
        expect(c[9] == "1.200, 1/0 (1)", f"far pairs 1.200, 1/0 (1) (got {c[9]})")
    expect("launches at >= 200 ns: 1 of 8 with a reading" in p.stdout, "the c2c line counts far launches")
    expect(os.path.exists(os.path.join(out, "summary.md")), "summary.md written")
    # a run's folder is never written over
    p2 = subprocess.run(["bash", script, "1"], capture_output=True, text=True,
                        env=dict(os.environ, OUT=out, COHORT_PERF="/bin/false"))
    expect(p2.returncode == 2 and "already holds a run" in p2.stderr,
           f"a new run into a finished run's folder is refused (rc {p2.returncode})")

print("FAILED" if fails else "ok")
sys.exit(1 if fails else 0)
