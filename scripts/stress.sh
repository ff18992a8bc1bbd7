#!/usr/bin/env bash
# Flake hunt, not part of the test command: runs the built test suites
# ROUNDS times with more ctest jobs than cpus (ranks then wait on each other
# under a scheduler that is always behind - where a race in a failure path or
# a timing assumption in a test shows), keeps each failing round's log and
# prints one line per round. Run scripts/test.sh first (it builds build/,
# build-asan/ and build-tsan/); usage:
#   scripts/stress.sh [ROUNDS] [plain|asan|tsan ...]   (default: 3 plain asan tsan)
# JOBS overrides the job count (default: cpus + 1), OUT the log folder.
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(plain asan tsan)
jobs=${JOBS:-$(($(nproc) + 1))}
out=${OUT:-$(mktemp -d /tmp/cohort-stress.XXXXXX)}
mkdir -p "$out"
root=$PWD
fails=0
for kind in "${kinds[@]}"; do
  case $kind in
    plain) dir=build; args=(-LE bench --timeout 600) ;;
    asan)  dir=build-asan; args=(-LE "nosan|bench" --timeout 900) ;;
    tsan)  dir=build-tsan; args=(-L threaded --timeout 900) ;;
    *) echo "stress: unknown kind '$kind' (plain, asan, tsan)" >&2; exit 2 ;;
  esac
  if [ ! -f "$dir/CTestTestfile.cmake" ]; then
    echo "stress: $dir is not built (run scripts/test.sh first)" >&2
    exit 2
  fi
  for r in $(seq 1 "$rounds"); do
    log=$out/$kind-$r.log
    start=$(date +%s)
    (cd "$dir" &&
     LSAN_OPTIONS=suppressions=$root/tests/lsan.supp CK_TIMEOUT_MULTIPLIER=$([ "$kind" = plain ] && echo 1 || echo 4) \
       ctest --output-on-failure -j"$jobs" "${args[@]}") > "$log" 2>&1
    rc=$?
    failed=$(grep -E '\*\*\*(Failed|Timeout)|\*\*\*Exception' "$log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | tr '\n' ' ')
    echo "$kind round $r: rc $rc in $(( $(date +%s) - start )) s${failed:+, failed: $failed}"
    if [ $rc -ne 0 ]; then fails=$((fails + 1)); else rm -f "$log"; fi
  done
done
echo "stress: $fails failing round(s); logs of failing rounds in $out"
[ $fails -eq 0 ]
