#!/bin/bash
# bench/compare/variant_ab.sh - cohort against itself: two (or more) variants of one
# cohort-perf run, each an environment or a build, in interleaved launches (ab_common.sh:
# the order rotates every round), in both modes (back to back and OSU style), and the
# per-cell p50 ratio of each variant to the first. The loop that session 34's A/B
# records (results/2026-12-06-s34-*/run.sh) each wrote again.
#
#   VARIANTS="auto on" bench/compare/variant_ab.sh [ROUNDS]       default 3
#   bench/compare/variant_ab.sh --summarize DIR                     the table again
# Each variant NAME takes VAR_<NAME>_ENV (words like COHORT_SHM_SINGLE_COPY=on) and
# VAR_<NAME>_PERF (another build's cohort-perf; default COHORT_PERF):
#   VAR_on_ENV="COHORT_SHM_SINGLE_COPY=on COHORT_SHM_SINGLE_COPY_BYTES=16385" \
#   VARIANTS="auto on" NP="4 8" COLLS=gather,scatter SIZES=81920,131072 bench/compare/variant_ab.sh
#   VAR_new_PERF=/tmp/wt/build-o3/tools/cohort-perf/cohort-perf VARIANTS="old new" ...
# Also: NP (default 4), COLLS (all_to_all), SIZES, T (0.1 s a size), MODES ("b2b osu"),
# TRANSPORT (auto; tcp for the tcp paths), IN_PLACE (no; yes adds the in-place rows, their op
# named "OP in place").
set -u
. "$(dirname "$0")/ab_common.sh"
VARIANTS=${VARIANTS:?VARIANTS="a b" names the variants}
NP=${NP:-4}
COLLS=${COLLS:-all_to_all}
SIZES=${SIZES:-65536,262144,1048576}
T=${T:-0.1}
MODES=${MODES:-"b2b osu"}
TRANSPORT=${TRANSPORT:-auto}
IN_PLACE=${IN_PLACE:-no}
[ "${1:-}" = --summarize ] || set -- "${1:-3}"
ab_args variant-ab "$@"
summarize() {
ab_python - "$OUT" $VARIANTS <<'PY' | tee "$OUT/summary.md"
import glob, json, os, statistics as S, sys
out, names = sys.argv[1], sys.argv[2:]
cell, state = {}, {}
for f in glob.glob(os.path.join(out, "*.json")):
    v, np_, mode, r = os.path.basename(f).split(".")[:4]
    # the host's core-to-core round trip before and after the launch (c2c.c; absent in
    # results from before session 40): the larger decides its state, near < 200 ns <= far
    try:
        cs = [int(x) for x in open(f[:-5] + ".c2c").read().split() if x.isdigit()]
    except OSError:
        cs = []
    for row in json.load(open(f))["results"]:
        k = (int(np_), mode, row["op"] + (" in place" if row.get("in_place") else ""), row["size"])
        cell.setdefault(k, {}).setdefault(v, {})[r] = (row["p50_us"], row["p99_us"], row["max_us"])
        state[(k, v, r)] = None if not cs else "near" if max(cs) < 200 else "far"
print("| ranks | mode | op | bytes | " + " | ".join(f"{n} p50 (min-max) p99 max us" for n in names)
      + " | " + " | ".join(f"{n}/{names[0]} p50, faster/slower" for n in names[1:]) + " |")
print("|" + "---|" * (4 + 2 * len(names) - 1))
for k in sorted(cell):
    d, base = cell[k], cell[k].get(names[0], {})
    cols = []
    for n in names:
        x = list(d.get(n, {}).values())
        cols.append(f"{S.median(a[0] for a in x):.2f} ({min(a[0] for a in x):.2f}-{max(a[0] for a in x):.2f}) "
                    f"{S.median(a[1] for a in x):.1f} {max(a[2] for a in x):.0f}" if x else "-")
    for n in names[1:]:
        rs = [d[n][r][0] / base[r][0] for r in d.get(n, {}) if r in base]
        cols.append(f"x{S.median(rs):.2f}, {sum(q < 1 for q in rs)}/{sum(q > 1 for q in rs)}" if rs else "-")
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | " + " | ".join(cols) + " |")
if any(state.values()):
    # unpaired: each variant's launches in one host state (a round's launches may differ)
    print("\nBy the host's state (c2c before/after the launch, the larger: near < 200 ns <= far); "
          "p50 median (launches) per variant:\n")
    print("| ranks | mode | op | bytes | state | " + " | ".join(names) + " | "
          + " | ".join(f"{n}/{names[0]}" for n in names[1:]) + " |")
    print("|" + "---|" * (5 + 2 * len(names) - 1))
    for k in sorted(cell):
        for st in ("near", "far"):
            med = {}
            for n in names:
                x = [a[0] for r, a in cell[k].get(n, {}).items() if state.get((k, n, r)) == st]
                med[n] = (S.median(x), len(x)) if x else None
            if not any(med.values()):
                continue
            cols = [f"{m[0]:.2f} ({m[1]})" if m else "-" for m in med.values()]
            b = med[names[0]]
            cols += [f"x{med[n][0] / b[0]:.2f}" if b and med[n] else "-" for n in names[1:]]
            print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {st} | " + " | ".join(cols) + " |")
PY
}
[ -n "$SUMMARIZE_ONLY" ] && { summarize; exit 0; }
info=("# VARIANTS=$VARIANTS NP=$NP COLLS=$COLLS SIZES=$SIZES T=$T MODES=$MODES TRANSPORT=$TRANSPORT IN_PLACE=$IN_PLACE ROUNDS=$ROUNDS")
for v in $VARIANTS; do
    e=VAR_${v}_ENV p=VAR_${v}_PERF
    info+=("# $v: env ${!e:-} perf ${!p:-$PERF}")
done
ab_tmp cohort-variant-ab
cc -O2 -Wall -pthread -o "$TMP/c2c" "$HERE/c2c.c" || exit 2
ab_info "${info[@]}"
variant() { # NAME: every rank count and mode once; the round from the file ab_rounds opened
    local v=$1 e=VAR_${1}_ENV p=VAR_${1}_PERF np m r
    r=$(ls "$OUT"/"$v".*.txt 2>/dev/null | wc -l)
    for np in $NP; do
        for m in $MODES; do
            local f=()
            [ "$m" = osu ] && f=(--osu)
            local c2c=$("$TMP/c2c" | awk '{print $4}')
            env ${!e:-} timeout 600 "${!p:-$PERF}" --np "$np" --transport "$TRANSPORT" --coll "$COLLS" \
                --sizes "$SIZES" --time "$T" --in-place "$IN_PLACE" "${f[@]}" \
                --json-out "$OUT/$v.$np.$m.$r.json" || echo "# $v np $np $m: exit $?"
            echo "$c2c $("$TMP/c2c" | awk '{print $4}')" > "$OUT/$v.$np.$m.$r.c2c"
        done
    done
}
ab_rounds $VARIANTS
summarize
