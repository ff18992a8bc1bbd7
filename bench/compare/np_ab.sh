#!/bin/bash
# bench/compare/np_ab.sh A_PERF B_PERF - version_ab.sh for N ranks on one
# host (oversubscribed when NP > cpus): two cohort-perf builds launched
# alternately, A B B A ..., per configuration in CONFIGS (name:np:mode,
# mode b2b or osu; default "over4osu:4:osu over4:4:b2b over8osu:8:osu").
# Per config, op and size: medians over pairs of B/A for time (avg_us: the
# max over ranks of each rank's mean, what bench/compare/check judges),
# p50 and p99 (the slowest rank's per-iteration step), and how many pairs
# went each way. Environment: N (8 pairs), OUT, OPS (broadcast,barrier),
# SIZES (8,64,256,1024), TIME (0.2 s per size), PERF_ARGS, C2C (a c2c binary:
# the core-to-core round trip before each launch).
set -euo pipefail
A=${1:?A cohort-perf} B=${2:?B cohort-perf}
N=${N:-8}
OUT=${OUT:-$(mktemp -d /tmp/cohort-np-ab.XXXXXX)}
mkdir -p "$OUT"
CONFIGS=${CONFIGS:-over4osu:4:osu over4:4:b2b over8osu:8:osu}
{ echo "A: $A"; echo "B: $B"; echo "date: $(date -u +%FT%TZ) load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "N=$N CONFIGS=$CONFIGS OPS=${OPS:-broadcast,barrier} SIZES=${SIZES:-8,64,256,1024} TIME=${TIME:-0.2}"; } | tee "$OUT/info.txt"
for i in $(seq 1 "$N"); do
  order="A B"; ((i % 2)) || order="B A"
  for cfg in $CONFIGS; do
    IFS=: read -r name np mode <<< "$cfg"
    osu=; [ "$mode" = osu ] && osu=--osu
    for v in $order; do
      bin=$A; [ "$v" = B ] && bin=$B
      c2c=$([ -n "${C2C:-}" ] && "$C2C" 2>/dev/null || echo "c2c ? ? - - - 0")
      echo "$name $v $i $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) $c2c" >> "$OUT/launches.txt"
      "$bin" --np "$np" --coll "${OPS:-broadcast,barrier}" --sizes "${SIZES:-8,64,256,1024}" \
        --time "${TIME:-0.2}" --in-place no $osu ${PERF_ARGS:-} --json > "$OUT/$name.$v.$i.json" 2>/dev/null ||
        { echo "launch $name $v $i failed" >&2; rm -f "$OUT/$name.$v.$i.json"; }
    done
  done
done
echo "date: $(date -u +%FT%TZ) load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/info.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import glob, json, os, statistics as S, sys
out = sys.argv[1]
res = {}
for f in glob.glob(os.path.join(out, "*.json")):
    c, v, i = os.path.basename(f).split(".")[:3]
    for r in json.load(open(f))["results"]:
        res.setdefault((c, r["op"], r["size"]), {}).setdefault(v, {})[i] = (
            r["avg_us"], r["step_p50_us"], r["step_p99_us"])
print("config op size: time (avg_us) A -> B, B/A median [min, max], pairs B faster / slower;"
      " step p50 A -> B; step p99 A -> B (medians over pairs, us)")
for k in sorted(res):
    a, b = res[k].get("A", {}), res[k].get("B", {})
    ps = sorted(set(a) & set(b))
    if not ps:
        continue
    r = [b[i][0] / a[i][0] for i in ps if a[i][0]]
    win = sum(b[i][0] < a[i][0] for i in ps)
    med = lambda x, j: S.median(x[i][j] for i in ps)
    print(f"{k[0]:9s} {k[1]:9s} {k[2]:>6d}: time {med(a,0):7.2f} -> {med(b,0):7.2f} x{S.median(r):.2f} "
          f"[{min(r):.2f}, {max(r):.2f}] {win}/{len(ps)-win}; p50 {med(a,1):6.2f} -> {med(b,1):6.2f}; "
          f"p99 {med(a,2):8.2f} -> {med(b,2):8.2f} ({len(ps)} pairs)")
PY
