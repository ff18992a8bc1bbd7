#!/usr/bin/env bash
# Usage: test_tools_man.sh BUILD_DIR SOURCE_DIR
# - every tools/<t>/ (a program) has man/<t>.1.scd, built to BUILD_DIR/man/<t>.1;
# - every long option in `<t> --help` appears in that page (so a new or
#   renamed flag fails here until the page says it), and `man -l` renders it;
# - cohort.7 exists and names every COHORT_* variable the library reads;
# - the bash completion offers a tool's options (from --help) and values.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
tools=()
for d in "$src"/tools/*/; do
  t=$(basename "$d")
  [ -x "$build/tools/$t/$t" ] && tools+=("$t")
done
[ ${#tools[@]} -ge 6 ] || fail "found only ${#tools[@]} built tools: ${tools[*]}"
for t in "${tools[@]}"; do
  scd=$src/man/$t.1.scd
  [ -f "$scd" ] || fail "$t has no man page ($scd)"
  [ -s "$build/man/$t.1" ] || fail "$build/man/$t.1 not built"
  help=$("$build/tools/$t/$t" --help 2>&1 || true)
  opts=$(grep -o -- '--[A-Za-z][A-Za-z0-9_-]*' <<<"$help" | sort -u)
  [ -n "$opts" ] || fail "$t --help lists no long option: $help"
  missing=()
  for o in $opts; do
    grep -q -- "$o" "$scd" || missing+=("$o")
  done
  [ ${#missing[@]} = 0 ] || fail "$t: --help options missing from man/$t.1.scd: ${missing[*]}"
  if command -v man >/dev/null; then
    grep -q "^NAME" <<<"$(MANWIDTH=80 man -l "$build/man/$t.1" 2>/dev/null)" || fail "man -l $t.1 does not render"
  fi
  echo "$t: $(wc -w <<<"$opts") long options, all in the man page"
done
[ -s "$build/man/cohort.7" ] || fail "cohort.7 not built"
# Every COHORT_* variable the library reads (getenv / coh_env_* with a
# literal name) is documented in cohort(7).
vars=$(grep -rhoE '(getenv|coh_env_str|coh_env_int|env_int_range)\("COHORT_[A-Z0-9_]+"' "$src/src" |
       grep -oE 'COHORT_[A-Z0-9_]+' | sort -u)
for v in $vars; do
  grep -q -- "$v" "$src/man/cohort.7.scd" || fail "cohort.7 does not document $v"
done
echo "cohort.7: documents the $(wc -w <<<"$vars") COHORT_* variables read by name"

# Completion, driven as bash would (the tools found on PATH).
export PATH
for t in "${tools[@]}"; do PATH=$build/tools/$t:$PATH; done
comp() { # words... (the last one is being completed) -> COMPREPLY, one a line
  bash -c '
    source "$0"
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _cohort_complete
    printf "%s\n" "${COMPREPLY[@]}"' "$src/tools/completion/cohort.bash" "$@"
}
# (outputs captured first: grep -q would end the pipe early under pipefail)
has() { grep -qx -- "$1" <<<"$2"; }
out=$(comp cohortrun --nproc); has --nproc-per-node "$out" || fail "completion: cohortrun --nproc: $out"
out=$(comp cohort-kv --addr x:1 ""); has set-generation "$out" && has compare-set "$out" || fail "completion: cohort-kv commands: $out"
out=$(comp cohort-perf -d b); has bfloat16 "$out" || fail "completion: cohort-perf -d b: $out"
has float "$out" && fail "completion: cohort-perf -d b offers float"
out=$(comp cohort-store --max); has --max-memory "$out" || fail "completion: cohort-store --max: $out"
out=$(comp cohort-perf --coll all_); has all_gather "$out" || fail "completion: cohort-perf --coll: $out"
echo "completion: ok"
