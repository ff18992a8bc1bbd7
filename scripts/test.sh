#!/usr/bin/env bash
# The README's second command: installs what is missing, builds and runs the
# whole test suite, then again under ASan+UBSan, then the threaded parts
# under TSan. Extra arguments go to ctest (e.g. -R store).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
jobs=$(nproc)
run() { # build-dir, cmake args..., then ctest
  local dir=$1; shift
  echo "== cohort tests: $dir ($*)"
  cmake -S . -B "$dir" -DCOHORT_FUZZ=OFF "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
}
run build -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Timing guards (label bench) are measurements: `ctest -L bench` runs them.
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600 -LE bench "${@}")
# The Python package (python/): pip install ./python and its pytest suite,
# for each python3 of the machine (scripts/test-python.sh).
scripts/test-python.sh
# Users build with -O3 too: inlining there brings warnings (-Werror) of its
# own, so the library and tools must build clean in Release as well.
echo "== cohort: Release (-O3) build of the library and tools"
cmake -S . -B build-o3 -DCOHORT_FUZZ=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-o3 -j"$jobs" --target cohort cohort_static cohort-etcd cohortrun cohort-store cohort-kv \
  cohort-perf cohort-trace cohort-soak >/dev/null
# Sanitizers: same suite. CK_TIMEOUT_MULTIPLIER gives Check tests more time.
run build-asan -DCMAKE_BUILD_TYPE=Debug -DCOHORT_SANITIZER=address,undefined
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
   LSAN_OPTIONS=suppressions=$PWD/../tests/lsan.supp CK_TIMEOUT_MULTIPLIER=3 ctest --output-on-failure -j"$jobs" --timeout 900 -LE "nosan|bench" "${@}")
# The Python extension and libcohort under ASan+UBSan, same pytest suite.
scripts/test-python.sh --asan
run build-tsan -DCMAKE_BUILD_TYPE=Debug -DCOHORT_SANITIZER=thread
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/../tests/tsan.supp" \
   CK_TIMEOUT_MULTIPLIER=4 ctest --output-on-failure -j"$jobs" --timeout 900 -L threaded "${@}")
# Fuzz targets: build with clang and replay a short bounded run of each.
if command -v clang >/dev/null; then
  echo "== cohort fuzz (short bounded runs)"
  CC=clang cmake -S . -B build-fuzz -DCOHORT_FUZZ=ON -DCOHORT_TOOLS=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
  # only the libFuzzer binaries (the rest was built and tested above)
  targets=$(cmake --build build-fuzz --target help | sed -n 's/^\.\.\. \(fuzz_[a-z_]*\)$/\1/p')
  cmake --build build-fuzz -j"$jobs" --target $targets >/dev/null
  for f in build-fuzz/tests/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    corpus=tests/fuzz/corpus/$(basename "$f" | sed 's/^fuzz_//')
    mkdir -p /tmp/cohort-fuzz-$$
    "$f" -max_total_time=20 -rss_limit_mb=2048 /tmp/cohort-fuzz-$$ ${corpus:+$corpus} >/dev/null 2>&1 \
      || { echo "fuzz target $f found a crash"; exit 1; }
    echo "fuzz $(basename "$f"): ok (20 s)"
    rm -rf /tmp/cohort-fuzz-$$
  done
fi
echo "== cohort: all tests passed"
