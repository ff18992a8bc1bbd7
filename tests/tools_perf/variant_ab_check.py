#!/usr/bin/env python3
"""bench/compare/variant_ab.sh --summarize on a synthetic run (no timing): three rounds of two
variants' cohort-perf JSON, with the c2c readings variant_ab.sh writes beside each launch.
Checks the table's p50 median and ratio, the rounds each way, and the split by host state
(a launch is far when either reading is >= 200 ns; a launch without readings, as in results
from before they were recorded, is in neither).
Usage: variant_ab_check.py SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

src = sys.argv[1]
script = os.path.join(src, "bench", "compare", "variant_ab.sh")
fails = []


def expect(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def launch(out, v, r, p50, c2c):
    base = os.path.join(out, f"{v}.4.b2b.{r}")
    with open(base + ".json", "w") as f:
        json.dump({"results": [{"op": "broadcast", "size": 262144, "p50_us": p50,
                                "p99_us": 2 * p50, "max_us": 4 * p50}]}, f)
    if c2c is not None:
        with open(base + ".c2c", "w") as f:
            f.write(f"{c2c[0]} {c2c[1]}\n")


with tempfile.TemporaryDirectory() as out:
    # round: (p50 a, c2c a), (p50 b, c2c b)
    rounds = {1: ((100.0, (100, 110)), (50.0, (105, 480))),   # b far (after)
              2: ((100.0, (90, 95)), (120.0, (100, 100))),     # both near
              3: ((200.0, (470, 480)), (80.0, None))}          # a far; b without readings
    for r, (a, b) in rounds.items():
        launch(out, "a", r, *a)
        launch(out, "b", r, *b)
    env = dict(os.environ, VARIANTS="a b")
    p = subprocess.run(["bash", script, "--summarize", out], capture_output=True, text=True,
                       env=env)
    print(p.stdout, p.stderr)
    expect(p.returncode == 0, f"--summarize exits 0 (got {p.returncode})")
    rows = [l for l in p.stdout.splitlines() if l.startswith("| 4 | b2b | broadcast | 262144 |")]
    expect(len(rows) == 3, f"the table's row and the near and far rows (got {len(rows)})")
    if len(rows) == 3:
        c = [x.strip() for x in rows[0].strip("|").split("|")]
        # b/a per round: 0.5, 1.2, 0.4 -> median 0.5, 2 faster, 1 slower
        expect(c[4].startswith("100.00 (100.00-200.00)"), f"a's p50 median and range (got {c[4]})")
        expect(c[6] == "x0.50, 2/1", f"b/a median of rounds and rounds each way (got {c[6]})")
        near = [x.strip() for x in rows[1].strip("|").split("|")]
        far = [x.strip() for x in rows[2].strip("|").split("|")]
        # near: a rounds 1-2 (100, 100), b round 2 (120); far: a round 3, b round 1
        expect(near[4] == "near" and near[5] == "100.00 (2)" and near[6] == "120.00 (1)"
               and near[7] == "x1.20", f"near row (got {near})")
        expect(far[4] == "far" and far[5] == "200.00 (1)" and far[6] == "50.00 (1)"
               and far[7] == "x0.25", f"far row (got {far})")
    # results without any readings: no state table
    for f in os.listdir(out):
        if f.endswith(".c2c"):
            os.remove(os.path.join(out, f))
    p = subprocess.run(["bash", script, "--summarize", out], capture_output=True, text=True,
                       env=env)
    expect(p.returncode == 0 and "By the host's state" not in p.stdout,
           "no readings: the table alone")

if fails:
    sys.exit(f"{len(fails)} failed")
print("ok")
