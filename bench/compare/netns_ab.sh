#!/bin/bash
# bench/compare/netns_ab.sh - paired A/B of cohort over 2 network-namespace
# "hosts" (a veth pair; ranks half and half, --transport tcp, as run.sh's
# netns configurations): launches A B B A ..., A and B each a cohort-perf
# binary plus an environment (A_ENV, B_ENV: space-separated VAR=value).
# Environment: N (6 pairs), NP (4), OSU (1: --osu), OPS (broadcast), SIZES
# (8,4096,16384,65536), TIME (0.1 s per size), OUT, C2C (a c2c binary: the
# core-to-core round trip before each launch). Needs root and ip netns.
# Summary as np_ab.sh: per op and size, medians over pairs of B/A (avg_us,
# the max over ranks of each rank's mean), pairs each way, step p50/p99.
set -euo pipefail
A=${1:?A cohort-perf} B=${2:?B cohort-perf}
N=${N:-6} NP=${NP:-4} OSU=${OSU:-1}
OUT=${OUT:-$(mktemp -d /tmp/cohort-netns-ab.XXXXXX)}
mkdir -p "$OUT"
NA=cohabA$$ NB=cohabB$$ IPA=10.232.0.1 IPB=10.232.0.2
cleanup() { ip netns del $NA 2>/dev/null || true; ip netns del $NB 2>/dev/null || true; }
trap cleanup EXIT
ip netns add $NA && ip netns add $NB
ip link add cabv0$$ type veth peer name cabv1$$
ip link set cabv0$$ netns $NA && ip link set cabv1$$ netns $NB
ip -n $NA link set cabv0$$ name coh0 && ip -n $NB link set cabv1$$ name coh0
ip -n $NA addr add $IPA/24 dev coh0 && ip -n $NB addr add $IPB/24 dev coh0
for ns in $NA $NB; do ip -n $ns link set lo up; ip -n $ns link set coh0 up; done
{ echo "A: $A env: ${A_ENV:-}"; echo "B: $B env: ${B_ENV:-}"
  echo "date: $(date -u +%FT%TZ) load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "N=$N NP=$NP OSU=$OSU OPS=${OPS:-broadcast} SIZES=${SIZES:-8,4096,16384,65536} TIME=${TIME:-0.1}"
  echo "ranks 0..$((NP / 2 - 1)) in $NA ($IPA), the rest in $NB ($IPB); --transport tcp"; } | tee "$OUT/info.txt"
launch() { # V I
  local bin=$A envs=${A_ENV:-}
  [ "$1" = B ] && bin=$B envs=${B_ENV:-}
  local port=$((20000 + RANDOM % 20000)) tok; tok=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  local common=(WORLD_SIZE=$NP MASTER_ADDR=$IPA MASTER_PORT=$port COHORT_JOB_ID=ab$$-$1-$2
                COHORT_TOKEN=$tok LOCAL_WORLD_SIZE=$((NP / 2)) $envs)
  local args=(--transport tcp --coll "${OPS:-broadcast}" --sizes "${SIZES:-8,4096,16384,65536}"
              --time "${TIME:-0.1}" --in-place no --deadline 120)
  [ "$OSU" = 1 ] && args+=(--osu)
  local pids=() i ns
  for i in $(seq 1 $((NP - 1))); do
    ns=$NA; [ $i -ge $((NP / 2)) ] && ns=$NB
    ip netns exec $ns env "${common[@]}" RANK=$i LOCAL_RANK=$((i % (NP / 2))) "$bin" "${args[@]}" \
      > /dev/null 2>&1 & pids+=($!)
  done
  ip netns exec $NA env "${common[@]}" RANK=0 LOCAL_RANK=0 "$bin" "${args[@]}" \
    --json-out "$OUT/$1.$2.json" > /dev/null 2>&1 || { echo "launch $1 $2 failed" >&2; rm -f "$OUT/$1.$2.json"; }
  for p in "${pids[@]}"; do wait $p || true; done
}
for i in $(seq 1 "$N"); do
  order="A B"; ((i % 2)) || order="B A"
  for v in $order; do
    c2c=$([ -n "${C2C:-}" ] && "$C2C" 2>/dev/null || echo "c2c ? ? - - - 0")
    echo "$v $i $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) $c2c" >> "$OUT/launches.txt"
    launch $v $i
  done
done
echo "date: $(date -u +%FT%TZ) load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/info.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import glob, json, os, statistics as S, sys
out = sys.argv[1]
res = {}
for f in glob.glob(os.path.join(out, "*.json")):
    v, i = os.path.basename(f).split(".")[:2]
    for r in json.load(open(f))["results"]:
        res.setdefault((r["op"], r["size"]), {}).setdefault(v, {})[i] = (
            r["avg_us"], r["step_p50_us"], r["step_p99_us"])
print("op size: time (avg_us) A -> B, B/A median [min, max], pairs B faster / slower;"
      " step p50 A -> B; step p99 A -> B (medians over pairs, us)")
for k in sorted(res):
    a, b = res[k].get("A", {}), res[k].get("B", {})
    ps = sorted(set(a) & set(b))
    if not ps:
        continue
    r = [b[i][0] / a[i][0] for i in ps if a[i][0]]
    win = sum(b[i][0] < a[i][0] for i in ps)
    med = lambda x, j: S.median(x[i][j] for i in ps)
    print(f"{k[0]:9s} {k[1]:>6d}: time {med(a,0):7.2f} -> {med(b,0):7.2f} x{S.median(r):.2f} "
          f"[{min(r):.2f}, {max(r):.2f}] {win}/{len(ps)-win}; p50 {med(a,1):6.2f} -> {med(b,1):6.2f}; "
          f"p99 {med(a,2):8.2f} -> {med(b,2):8.2f} ({len(ps)} pairs)")
PY
