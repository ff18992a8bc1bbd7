#!/bin/bash
# bench/compare/tcp_gate_ab.sh A_PERF B_PERF [LABEL=PERF[:VAR=VALUE] ...] -
# paired A/B of cohort-perf builds over TCP (the poll gate of session 11:
# A = main before it, B = with it; more variants, e.g. the same binary under
# another setting of the gate's variable, as C=PATH:VAR=VALUE), the order rotated per
# round and per configuration, c2c recorded before each round. Configurations
# (CONFIGS): np2 back to back and --osu, ranks pinned one per core
# (--bind core) and unpinned (--bind none); np4 (oversubscribed on 2 vCPUs)
# back to back and --osu. Environment: N (8 rounds), OUT, OPS, SIZES,
# TIME (0.3 s per size), C2C (a c2c binary). Summary: tcp_gate_ab.py OUT.
set -euo pipefail
A=${1:?A cohort-perf} B=${2:?B cohort-perf}
shift 2
VAR=("A=$A" "B=$B" "$@")
N=${N:-8}
OUT=${OUT:-$(mktemp -d /tmp/cohort-tcpgate-ab.XXXXXX)}
C2C=${C2C:-}
OPS=${OPS:-broadcast,all_reduce,all_gather}
SIZES=${SIZES:-8,4096,1048576,4194304}
CONFIGS=${CONFIGS:-"np2-core np2-core-osu np2-none np2-none-osu np4-none np4-none-osu"}
mkdir -p "$OUT"
{ printf '%s\n' "${VAR[@]}"; echo "start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"; } | tee "$OUT/meta.txt"
nv=${#VAR[@]}
for i in $(seq 1 "$N"); do
  for cf in $CONFIGS; do
    np=${cf%%-*}; np=${np#np}; rest=${cf#*-}; bind=${rest%%-*}; osu=; [[ $cf == *-osu ]] && osu=--osu
    c=$([ -n "$C2C" ] && "$C2C" 2>/dev/null || echo "c2c ? ? - - - 0")
    echo "$i $cf $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) $c" >> "$OUT/c2c.txt"
    for j in $(seq 0 $((nv - 1))); do
      k=$(( (j + i) % nv )); ((i % 2)) || k=$(( (nv - 1 - j + i) % nv ))
      spec=${VAR[$k]}; v=${spec%%=*}; rest=${spec#*=}; bin=${rest%%:*}; env=; [[ $rest == *:* ]] && env=${rest#*:}
      env $env "$bin" --np "$np" --transport tcp --coll "$OPS" --sizes "$SIZES" --time "${TIME:-0.3}" \
        --in-place no --bind "$bind" $osu --json > "$OUT/$cf.$v.$i.json" 2>"$OUT/$cf.$v.$i.err" ||
        { echo "launch $cf $v $i failed" >&2; rm -f "$OUT/$cf.$v.$i.json"; }
    done
  done
done
echo "end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/meta.txt"
python3 "$(dirname "$0")/tcp_gate_ab.py" "$OUT" | tee "$OUT/summary.txt"
