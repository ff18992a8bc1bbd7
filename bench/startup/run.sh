#!/usr/bin/env bash
# Start-up cost: launch + init + one barrier + finalize + exit of a 2-rank job,
# end to end as a user sees it, for
#   cohortrun -n 2 hello_cohort                         (cohort)
#   mpirun --allow-run-as-root --oversubscribe -np 2 hello_mpi   (Open MPI)
#   mpiexec.mpich -n 2 hello_mpi                        (MPICH, Hydra)
# plus each launcher running /bin/true (the launcher's own share).
# hyperfine runs each command (no shell in between); the table gives median,
# p99 and max of the wall times. Usage:
#   bench/startup/run.sh [BUILD_DIR]     RUNS=100 WARMUP=5 by default
# Writes the table to stdout and the raw hyperfine JSON to $OUT_DIR
# (default: a temporary directory, printed).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
runs=${RUNS:-100}
warmup=${WARMUP:-5}
out=${OUT_DIR:-$(mktemp -d /tmp/cohort-startup.XXXXXX)}
mkdir -p "$out"

crun=$build/tools/cohortrun/cohortrun
hello=$build/bench/startup/hello_cohort
if [ ! -x "$crun" ] || [ ! -x "$hello" ]; then
  cmake --build "$build" --target cohortrun hello_cohort >/dev/null
fi
command -v hyperfine >/dev/null || { echo "run.sh: hyperfine is not installed" >&2; exit 1; }

# The MPI program, built with each MPI's own compiler wrapper.
have_ompi=0 have_mpich=0
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 bench/startup/hello_mpi.c -o "$out/hello_ompi" && have_ompi=1
fi
if command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null; then
  mpicc.mpich -O2 bench/startup/hello_mpi.c -o "$out/hello_mpich" && have_mpich=1
fi

names=() cmds=()
add() { names+=("$1"); cmds+=("$2"); }
add "cohortrun -n 2 hello_cohort" "$crun -q -n 2 $hello"
[ $have_ompi = 1 ] && add "Open MPI mpirun -np 2 hello_mpi" \
  "mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 $out/hello_ompi"
[ $have_mpich = 1 ] && add "MPICH mpiexec -n 2 hello_mpi" "mpiexec.mpich -n 2 $out/hello_mpich"
add "cohortrun -n 2 /bin/true" "$crun -q -n 2 /bin/true"
[ $have_ompi = 1 ] && add "Open MPI mpirun -np 2 /bin/true" \
  "mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 /bin/true"
[ $have_mpich = 1 ] && add "MPICH mpiexec -n 2 /bin/true" "mpiexec.mpich -n 2 /bin/true"

for i in "${!cmds[@]}"; do
  # Each command must work before it is timed.
  ${cmds[$i]} >/dev/null || { echo "run.sh: '${cmds[$i]}' failed" >&2; exit 1; }
  hyperfine -N --style none --warmup "$warmup" --runs "$runs" \
    --export-json "$out/cmd$i.json" "${cmds[$i]}" >/dev/null
done

printf '%s\n' "${names[@]}" >"$out/names.txt"
python3 - "$out" "${#cmds[@]}" "$runs" <<'PY'
import json, sys, os, platform
out, n, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = open(os.path.join(out, "names.txt")).read().splitlines()
def pct(xs, p):
    xs = sorted(xs)
    # nearest rank: the smallest value with at least p% of the samples at or below it
    k = max(0, min(len(xs) - 1, -(-len(xs) * p // 100) - 1))
    return xs[k]
print(f"Start-up of a 2-rank job, {runs} runs each ({os.cpu_count()} cores, {platform.release()}):")
print()
print("| command | median ms | p99 ms | max ms |")
print("|---|---:|---:|---:|")
for i in range(n):
    t = [x * 1e3 for x in json.load(open(os.path.join(out, f"cmd{i}.json")))["results"][0]["times"]]
    print(f"| {names[i]} | {pct(t, 50):.1f} | {pct(t, 99):.1f} | {max(t):.1f} |")
PY
echo
echo "raw hyperfine JSON: $out"
