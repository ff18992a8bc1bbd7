#!/bin/bash
# bench/compare/bcast_algo_ab.sh - TCP broadcast (or COLL), the message algorithms forced
# in turn (COHORT_ALGO_<COLL>), interleaved launches (the order rotates each round), and
# Gloo beside them: which algorithm a size and rank count should get.
#   NP="2 4" ALGOS="tree scatter_allgather flat" N=5 bench/compare/bcast_algo_ab.sh
#   COLL=reduce_scatter ALGOS="ring direct" GLOO=0 SIZES=16,1024,16384 bench/compare/bcast_algo_ab.sh
#   OSU=1: a barrier between iterations (cohort-perf --osu); Gloo then stays out
# Prints per rank count, size and algorithm: median over launches of the launch's
# avg time, min-max over launches, median p99; and each algorithm's ratio to Gloo.
P=${COHORT_PERF:-$(dirname "$0")/../../build/tools/cohort-perf/cohort-perf}
N=${N:-5}
COLL=${COLL:-broadcast}
VAR=COHORT_ALGO_$(echo "$COLL" | tr a-z A-Z)
NP=${NP:-"2 4"}
ALGOS=${ALGOS:-"tree scatter_allgather flat"}
SIZES=${SIZES:-1048576,4194304,16777216,67108864}
T=${T:-0.2}
GLOO=${GLOO:-1}
OSU=${OSU:-0}
OSUF=()
if [ "$OSU" = 1 ]; then OSUF=(--osu); GLOO=0; fi
PEERS=${PEERS_SRC:-/work/shared/peers/coll}
OUT=${OUT:-/tmp/bcast_algo_ab.$$}
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
    set -- $ALGOS
    for np in $NP; do
        # rotate: round i starts with algorithm i mod k
        list=("$@"); k=${#list[@]}
        for j in $(seq 0 $((k - 1))); do
            a=${list[$(((i + j) % k))]}
            env "$VAR=$a" timeout 600 "$P" --np "$np" --transport tcp --coll "$COLL" "${OSUF[@]}" \
                --sizes "$SIZES" --time "$T" --in-place no --json-out "$OUT/$a.$np.$i.json" \
                > "$OUT/$a.$np.$i.txt" 2>&1 || echo "!! $a np=$np round $i failed" >&2
        done
        if [ "$GLOO" = 1 ]; then
            port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
            timeout 600 /usr/bin/python3 "$PEERS/gloo_bench.py" -n "$np" -c "$COLL" -s "$SIZES" \
                -t "$T" --port "$port" -l ab > "$OUT/gloo.$np.$i.txt" 2>&1 || echo "!! gloo np=$np round $i failed" >&2
        fi
    done
done
/usr/bin/python3 - "$OUT" "$COLL" "$ALGOS" <<'PY'
import glob, json, os, re, sys, statistics as S
out = sys.argv[1]
d = {}
for f in glob.glob(f"{out}/*.json"):
    a, np_, i = os.path.basename(f).split(".")[:3]
    for r in json.load(open(f))["results"]:
        d.setdefault((int(np_), r["size"], a), []).append((r["avg_us"], r.get("step_p99_us", r.get("p99_us"))))
for f in glob.glob(f"{out}/gloo.*.txt"):
    np_ = int(os.path.basename(f).split(".")[1])
    for line in open(f):
        x = line.split()
        if len(x) >= 9 and x[0] == sys.argv[2] and x[1].isdigit():
            d.setdefault((np_, int(x[1]), "gloo"), []).append((float(x[3]), None))
print(f"{'np':>3} {'size':>9} {'algo':18} {'n':>2} {'median us':>10} {'min-max us':>20} {'p99 us':>9} {'/gloo':>6} {'/first':>6}")
for k in sorted(d):
    v = d[k]; lat = [x[0] for x in v]; p99 = [x[1] for x in v if x[1] is not None]
    g = d.get((k[0], k[1], "gloo"))
    rg = f"{S.median(lat) / S.median([x[0] for x in g]):.2f}" if g and k[2] != "gloo" else ""
    f0 = S.median([x[0] for x in d.get((k[0], k[1], sys.argv[3].split()[0]), [(float("nan"), None)])])
    print(f"{k[0]:>3} {k[1]:>9} {k[2]:18} {len(v):>2} {S.median(lat):>10.2f} "
          f"{min(lat):>9.2f}-{max(lat):<9.2f} {S.median(p99) if p99 else float('nan'):>9.2f} {rg:>6} "
          f"{S.median(lat) / f0:>6.2f}")
PY
echo "raw: $OUT"
