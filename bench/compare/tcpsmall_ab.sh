#!/bin/bash
# bench/compare/tcpsmall_ab.sh A_SPEC B_SPEC - paired A/B of two cohort-perf
# builds over TCP (session 12, the ACK flushed after the 2-rank barrier).
# A spec is PATH[:VAR=VALUE] (e.g. a copy of main's build dir:
# /tmp/A/tools/cohort-perf/cohort-perf:LD_LIBRARY_PATH=/tmp/A). Order per
# round A B B A (odd rounds) or B A A B (even), so each round is two pairs;
# c2c (C2C: a bench/compare/c2c binary) before each round. CONFIGS:
# np<N>-<bind>[-osu] (bind none|core|auto). Environment: N rounds (8), OUT,
# OPS (broadcast), SIZES (8,4096), TIME (0.3 s per size).
# Summary: tcpsmall_ab.py OUT.
set -euo pipefail
A=${1:?A spec} B=${2:?B spec}
N=${N:-8}
OUT=${OUT:-$(mktemp -d /tmp/cohort-tcpsmall-ab.XXXXXX)}
C2C=${C2C:-}
OPS=${OPS:-broadcast}
SIZES=${SIZES:-8,4096}
CONFIGS=${CONFIGS:-"np2-none np2-none-osu np2-core np2-core-osu"}
mkdir -p "$OUT"
{ echo "A=$A"; echo "B=$B"; echo "OPS=$OPS SIZES=$SIZES TIME=${TIME:-0.3} N=$N CONFIGS=$CONFIGS"
  echo "start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"; } | tee "$OUT/meta.txt"
launch() { # variant config round slot
  local spec=$1 v=$2 cf=$3 i=$4 s=$5
  local bin=${spec%%:*} env=
  [[ $spec == *:* ]] && env=${spec#*:}
  local np=${cf%%-*}; np=${np#np}; local rest=${cf#*-}; local bind=${rest%%-*} osu=
  [[ $cf == *-osu ]] && osu=--osu
  env $env "$bin" --np "$np" --transport tcp --coll "$OPS" --sizes "$SIZES" --time "${TIME:-0.3}" \
    --in-place no --bind "$bind" $osu --json > "$OUT/$cf.$v.$i$s.json" 2>"$OUT/$cf.$v.$i$s.err" ||
    { echo "launch $cf $v $i$s failed" >&2; rm -f "$OUT/$cf.$v.$i$s.json"; }
}
for i in $(seq 1 "$N"); do
  for cf in $CONFIGS; do
    c=$([ -n "$C2C" ] && "$C2C" 2>/dev/null || echo "c2c ? ? - - - 0")
    echo "$i $cf $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) $c" >> "$OUT/c2c.txt"
    if ((i % 2)); then order="A:a B:a B:b A:b"; else order="B:a A:a A:b B:b"; fi
    for o in $order; do
      v=${o%%:*}; s=${o#*:}
      [ "$v" = A ] && spec=$A || spec=$B
      launch "$spec" "$v" "$cf" "$i" "$s"
    done
  done
done
echo "end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/meta.txt"
python3 "$(dirname "$0")/tcpsmall_ab.py" "$OUT" | tee "$OUT/summary.txt"
