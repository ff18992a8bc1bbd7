#!/usr/bin/env python3
"""cohort-perf read by an nccl-tests parser, the way users meet it.

Runs cohort-perf under the names and flags of nccl-tests' binaries
(all_reduce_perf -b 8 -e 128K -f 2 -g 1 ..., started by a launcher as
mpirun would start them) and parses the output with the regular expressions
scripts use on nccl-tests output: the 13-field row, "# Avg bus bandwidth",
"# Out of bounds values". Usage: nccl_parse.py COHORT_PERF COHORTRUN
"""
import os
import re
import subprocess
import sys
import tempfile

# The usual nccl-tests row regex (size count type redop root, then time algbw
# busbw #wrong for out-of-place and in-place).
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                 r"\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)")
AVG = re.compile(r"Avg bus bandwidth\s*:\s*([\d.e+-]+)")
OOB = re.compile(r"# Out of bounds values : (\d+) (OK|FAILED)")


def parse(txt):
    rows = []
    for line in txt.splitlines():
        m = ROW.match(line)
        if m:
            rows.append({"size": int(m.group(1)), "count": int(m.group(2)), "type": m.group(3),
                         "redop": m.group(4), "root": int(m.group(5)), "time": float(m.group(6)),
                         "algbw": float(m.group(7)), "busbw": float(m.group(8)),
                         "wrong": m.group(9), "time_ip": float(m.group(10)),
                         "busbw_ip": float(m.group(12)), "wrong_ip": m.group(13)})
    avg = AVG.search(txt)
    oob = OOB.search(txt)
    return rows, float(avg.group(1)) if avg else None, oob.groups() if oob else None


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out = p.stdout.decode()
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(argv)} exited {p.returncode}\n{out}\n{p.stderr.decode()}")
    return out


def expect(cond, what, out):
    if not cond:
        sys.exit(f"FAIL: {what}\n{out}")


def main():
    perf, crun = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as d:
        for name in ("all_reduce_perf", "all_gather_perf", "broadcast_perf", "reduce_scatter_perf"):
            os.symlink(perf, os.path.join(d, name))
        nccl_flags = ["-g", "1", "-t", "1", "-w", "2", "-n", "5", "-c", "1"]

        # all_reduce_perf -b 8 -e 128K -f 2 under a launcher, 2 ranks.
        out = run([crun, "--no-prefix", "-np", "2", os.path.join(d, "all_reduce_perf"),
                   "-b", "8", "-e", "128K", "-f", "2"] + nccl_flags)
        rows, avg, oob = parse(out)
        sizes = [r["size"] for r in rows]
        expect(sizes == [8 << i for i in range(15)], f"all_reduce sizes {sizes}", out)
        for r in rows:
            expect(r["type"] == "float" and r["redop"] == "sum" and r["root"] == -1,
                   f"row fields {r}", out)
            expect(r["wrong"] == "0" and r["wrong_ip"] == "0", f"#wrong {r}", out)
            expect(r["count"] == r["size"] // 4 and r["time"] > 0 and r["time_ip"] > 0,
                   f"count/time {r}", out)
        expect(avg is not None and abs(avg - sum(r["busbw"] + r["busbw_ip"] for r in rows)
                                       / (2 * len(rows))) < 0.01 + 0.01 * avg,
               f"Avg bus bandwidth {avg}", out)
        expect(oob == ("0", "OK"), f"out of bounds line {oob}", out)
        expect("# nThread 1 nGpus 1 minBytes 8 maxBytes 131072 step: 2(factor)" in out,
               "nccl-tests first line", out)
        expect(out.count("#  Rank ") == 2, "one '#  Rank' line per rank", out)

        # all_gather_perf -d half, fixed increment -i.
        out = run([perf, "--np", "3", "-b", "96", "-e", "480", "-i", "192", "-d", "half"]
                  + nccl_flags)
        rows, avg, oob = parse(out)
        expect([r["size"] for r in rows] == [96, 288, 480], "-i sizes", out)
        expect(all(r["type"] == "half" and r["wrong"] == "0" for r in rows), "half rows", out)

        # broadcast_perf -r all: every root in turn, root column = the root.
        out = run([os.path.join(d, "broadcast_perf"), "--np", "3", "-b", "64", "-e", "64",
                   "-r", "all"] + nccl_flags)
        rows, avg, oob = parse(out)
        expect([r["root"] for r in rows] == [0, 1, 2], "roots", out)
        # -N 2: the sweep twice
        out = run([os.path.join(d, "broadcast_perf"), "--np", "2", "-b", "64", "-e", "64",
                   "-N", "2"] + nccl_flags)
        expect(len(parse(out)[0]) == 2, "-N 2 rows", out)
        expect(all(r["redop"] == "none" for r in rows), "broadcast redop none", out)

        # reduce_scatter_perf -o all -d all: every (type, op) that fits.
        out = run([os.path.join(d, "reduce_scatter_perf"), "--np", "2", "-b", "1K", "-e", "1K",
                   "-o", "all", "-d", "all"] + nccl_flags)
        rows, avg, oob = parse(out)
        pairs = {(r["type"], r["redop"]) for r in rows}
        expect(("float", "avg") in pairs and ("int32", "bxor") in pairs
               and ("float", "bxor") not in pairs and ("int8", "avg") not in pairs,
               f"type/op pairs {sorted(pairs)}", out)
        expect(all(r["wrong"] == "0" and r["wrong_ip"] == "0" for r in rows), "all ok", out)
    print("nccl-tests parse: ok")


if __name__ == "__main__":
    main()
