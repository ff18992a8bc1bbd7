#!/usr/bin/env bash
# bench/compare/bind_ab.sh [ROUNDS] - cohort's 2-rank shm launches unbound
# (COHORT_BIND=none, the default) against bound one rank per core (auto, Open
# MPI's default), interleaved, the order rotating; every launch records each
# rank's cpu, migrations and context switches per row (cohort-perf --sched)
# and the cpu0<->cpu1 cache-line round trip before and after (c2c.c), so that
# a launch's mode can be told apart by cause (docs/performance.md, "Which mode
# a 2-rank launch is in"). NP=2 SIZES=8,4096,65536,1048576 T=0.1 OPS=broadcast,all_reduce.
# --summarize DIR: the table again from a run's files.
set -euo pipefail
source "$(dirname "$0")/ab_common.sh"
ab_args bind "$@"
NP=${NP:-2} SIZES=${SIZES:-8,4096,65536,1048576} T=${T:-0.1} OPS=${OPS:-broadcast,all_reduce}
ab_tmp bind_ab
cc -O2 -Wall -pthread -o "$TMP/c2c" "$HERE/c2c.c"
variant() {
    echo "# c2c before: $("$TMP/c2c" || true)"
    COHORT_BIND=$1 "$PERF" --np "$NP" --coll "$OPS" --sizes "$SIZES" --time "$T" --in-place no \
        --percentiles --sched -l "bind $1"
    echo "# c2c after: $("$TMP/c2c" || true)"
}
if [ -z "$SUMMARIZE_ONLY" ]; then
    ab_info "# bind_ab: NP=$NP SIZES=$SIZES T=$T OPS=$OPS ROUNDS=$ROUNDS"
    ab_rounds none auto
fi
# Per launch: c2c before/after (ns), then per op and size mean / p50 / p99 / max (us) and
# whether the two ranks shared one cpu ("1cpu") for that row.
python3 - "$OUT" <<'PY'
import glob, os, re, sys
out = sys.argv[1]
rows = []
files = [p for p in glob.glob(os.path.join(out, "*.txt")) if re.search(r"\.\d+\.txt$", p)]
for f in sorted(files, key=lambda p: (int(p.split(".")[-2]), p)):
    v = os.path.basename(f).split(".")[0]
    txt = open(f).read().splitlines()
    c2c = [l.split()[6] for l in txt if l.startswith("# c2c ") and len(l.split()) > 6]
    op, cells = None, []
    for l in txt:
        m = re.match(r"# Collective: (\w+)", l)
        if m:
            op = m.group(1)
        f_ = l.split()
        if op and f_ and f_[0].isdigit() and len(f_) >= 12:
            cells.append([op, int(f_[0]), float(f_[5]), float(f_[-3]), float(f_[-2]), float(f_[-1]), ""])
        m = re.match(r"# sched: (\w+) (\d+) B out-of-place: (.*)", l)
        if m and cells:
            cpus = re.findall(r"cpu (\d+)>(\d+)", m.group(3))
            cells[-1][6] = "1cpu" if len({c for pair in cpus for c in pair}) == 1 else ""
    for c in cells:
        rows.append((v, os.path.basename(f), "->".join(c2c), *c))
print("| launch | c2c ns | op | bytes | mean | p50 | p99 | max | one cpu |")
print("|---|---|---|---:|---:|---:|---:|---:|---|")
for v, f, c2c, op, b, mean, p50, p99, mx, one in rows:
    print(f"| {f} | {c2c} | {op} | {b} | {mean:.2f} | {p50:.2f} | {p99:.2f} | {mx:.1f} | {one} |")
PY
