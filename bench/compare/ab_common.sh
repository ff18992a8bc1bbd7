# bench/compare/ab_common.sh - what the interleaved A/B scripts share (sourced by
# the *_ab.sh scripts): their arguments, the run's folder and
# info.txt, and the rounds - every variant once a round, the order rotating, each
# launch's output in OUT/<variant>.<round>.txt between the load before and after.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PERF=${COHORT_PERF:-$ROOT/build/tools/cohort-perf/cohort-perf}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# ab_args NAME ARGS...: [ROUNDS] (default 5), or --summarize DIR (SUMMARIZE_ONLY=1:
# the table again from a run's files); OUT defaults to results/NAME-<date>.
ab_args() {
    local name=$1; shift
    SUMMARIZE_ONLY="" ROUNDS=${1:-5}
    if [ "${1:-}" = --summarize ]; then SUMMARIZE_ONLY=1 OUT=${2:?--summarize DIR} ROUNDS=0; fi
    OUT=${OUT:-$HERE/results/$name-$(date +%Y%m%d-%H%M%S)}
    # A run writes <variant>.<round>.txt and info.txt over what OUT holds: never over
    # a finished run (committed results were overwritten that way once, by a run
    # started where a table was wanted: that is --summarize DIR).
    if [ -z "$SUMMARIZE_ONLY" ] && [ -e "$OUT/info.txt" ]; then
        echo "$OUT already holds a run (info.txt): give a new OUT, or --summarize $OUT for its table" >&2
        exit 2
    fi
    mkdir -p "$OUT" || exit 2
}

# ab_tmp NAME: TMP, a temporary folder removed at exit.
ab_tmp() {
    TMP=$(mktemp -d "/tmp/$1.XXXXXX") || exit 2
    trap 'rm -rf "$TMP"' EXIT
}

# Open MPI's vader single-copy mechanism, as ompi_info reports it.
vader_mechanism() {
    ompi_info --param btl vader --level 9 | grep -o 'btl_vader_single_copy_mechanism" (current value: "[a-z]*"' | tr -d '"'
}

# ab_info LINE...: OUT/info.txt (the machine, cohort's version, ptrace_scope, then
# the lines given), printed too.
ab_info() {
    {
        echo "# date: $(date -Is)  kernel: $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc)  cohort: $(git -C "$ROOT" describe --always --dirty)"
        echo "# ptrace_scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 'absent (no Yama)')"
        local l
        for l in "$@"; do echo "$l"; done
    } > "$OUT/info.txt"
    cat "$OUT/info.txt"
}

# ab_rounds VARIANT...: ROUNDS rounds; each runs the script's `variant V` once for
# every V given, starting one further along the list each round, so that the
# machine's drift hits every variant alike.
ab_rounds() {
    local vs=("$@") n=$# r k v f
    for r in $(seq 1 "$ROUNDS"); do
        for k in $(seq 0 $((n - 1))); do
            v=${vs[$(( (k + r) % n ))]}
            f=$OUT/$v.$r.txt
            echo "[$(date +%H:%M:%S)] round $r $v" >&2
            echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" > "$f"
            variant "$v" >> "$f" 2>&1
            echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$f"
        done
    done
}

# ab_python ARGS...: python3 with ab_rows.py importable (the summaries' parsing).
ab_python() { PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" python3 "$@"; }
