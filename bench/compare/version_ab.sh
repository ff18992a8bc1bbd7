#!/bin/bash
# bench/compare/version_ab.sh A_PERF B_PERF - two builds of cohort (two
# cohort-perf binaries, each run against its own libcohort) launched
# alternately, A B B A A B ..., so drift of a shared machine hits both
# alike: a refactoring's paired A/B (issue: "no behaviour change ... the
# shm/tcp latency at 8 B and bandwidth at 1 MiB stay within noise").
# Per transport (shm, tcp), op and size: the median over launch pairs of
# (B p50 - A p50) and of B/A, with the per-pair spread, and the medians of
# p99. Environment: N (8 pairs), OUT (a temp dir), TRANSPORTS ("shm tcp"),
# OPS (all_reduce,broadcast), SIZES (8,1048576), TIME (0.3 s per size),
# NP (2 ranks; 4 or 8 on 2 cores: ranks outnumbering cpus), PERF_ARGS (more
# cohort-perf options, e.g. --osu, --mem shared).
set -euo pipefail
A=${1:?A cohort-perf} B=${2:?B cohort-perf}
N=${N:-8}
OUT=${OUT:-$(mktemp -d /tmp/cohort-version-ab.XXXXXX)}
mkdir -p "$OUT"
echo "A: $A"; echo "B: $B"; echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT"
for i in $(seq 1 "$N"); do
  order="A B"; ((i % 2)) || order="B A"
  for t in ${TRANSPORTS:-shm tcp}; do
    for v in $order; do
      bin=$A; [ "$v" = B ] && bin=$B
      "$bin" --np "${NP:-2}" --transport "$t" --coll "${OPS:-all_reduce,broadcast}" --sizes "${SIZES:-8,1048576}" \
        --time "${TIME:-0.3}" --in-place no ${PERF_ARGS:-} --json > "$OUT/$t.$v.$i.json" 2>/dev/null ||
        { echo "launch $t $v $i failed" >&2; rm -f "$OUT/$t.$v.$i.json"; }
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" <<'PY'
import glob, json, os, statistics as S, sys
out = sys.argv[1]
res = {}
for f in glob.glob(os.path.join(out, "*.json")):
    t, v, i = os.path.basename(f).split(".")[:3]
    for r in json.load(open(f))["results"]:
        res.setdefault((t, r["op"], r["size"]), {}).setdefault(v, {})[i] = (r["step_p50_us"], r.get("step_p99_us"))
print("transport op size: B-A of p50 (median over pairs [min, max]), B/A, p50 A -> B, p99 A -> B (us)")
for k in sorted(res):
    a, b = res[k].get("A", {}), res[k].get("B", {})
    ps = sorted(set(a) & set(b))
    if not ps:
        continue
    d = [b[i][0] - a[i][0] for i in ps]
    r = [b[i][0] / a[i][0] for i in ps if a[i][0]]
    p99 = lambda x: S.median(x[i][1] for i in ps) if all(x[i][1] is not None for i in ps) else float("nan")
    print(f"{k[0]:4s} {k[1]:11s} {k[2]:>8d}: {S.median(d):+8.3f} [{min(d):+.3f}, {max(d):+.3f}]  "
          f"x{S.median(r):.3f}  {S.median(a[i][0] for i in ps):9.3f} -> {S.median(b[i][0] for i in ps):9.3f}  "
          f"p99 {p99(a):9.2f} -> {p99(b):9.2f}  ({len(ps)} pairs)")
PY
