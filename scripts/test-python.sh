#!/usr/bin/env bash
# The Python package's tests (part of scripts/test.sh): builds and installs
# python/ (pip install ./python) for the python3 on PATH and for Debian's
# /usr/bin/python3 when it is another interpreter, then runs python/tests
# with each (real multi-process jobs under build/tools/cohortrun).
# Extra arguments go to pytest (e.g. -k sigint).
#   --asan: instead, build the extension and libcohort with ASan+UBSan (into
#   build-asan/python-*) for the python3 on PATH and run the suite with the
#   runtime preloaded into every process (leak checks off: CPython's own).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
asan=0
if [ "${1-}" = --asan ]; then asan=1; shift; fi
export COHORTRUN=${COHORTRUN:-$root/build/tools/cohortrun/cohortrun}
if [ ! -x "$COHORTRUN" ]; then
  cmake -S . -B build -DCOHORT_FUZZ=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j"$(nproc)" --target cohortrun >/dev/null
fi
if ((asan)); then
  py=$(python3 -c 'import sys; print(sys.executable)')
  echo "== cohort python under ASan+UBSan: $py"
  site=$root/build-asan/python-site
  rm -rf "$site"
  san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
  COHORT_LIB_BUILD_DIR=$root/build-asan/python-lib \
  COHORT_CMAKE_ARGS="-DCOHORT_SANITIZER=address,undefined -DCMAKE_BUILD_TYPE=Debug" \
  CFLAGS="$san" LDFLAGS="-fsanitize=address,undefined" \
    "$py" -m pip install --no-build-isolation --no-deps --quiet --disable-pip-version-check \
      --root-user-action=ignore --target "$site" ./python
  LD_PRELOAD=$(cc -print-file-name=libasan.so) PYTHONPATH=$site \
  ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$py" -m pytest -q -p no:cacheprovider python/tests "$@" \
      --ignore=python/tests/test_torch.py  # pure Python over Checker (tested here); torch is not instrumented
  exit 0
fi
pythons=()
for p in "$(command -v python3 || true)" /usr/bin/python3; do
  [ -n "$p" ] && [ -x "$p" ] || continue
  real=$("$p" -c 'import sys; print(sys.executable)')
  case " ${pythons[*]-} " in *" $real "*) ;; *) pythons+=("$real") ;; esac
done
for py in "${pythons[@]}"; do
  echo "== cohort python: $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
  flags=(--no-build-isolation --no-deps --quiet --disable-pip-version-check --root-user-action=ignore)
  # Debian's interpreter is "externally managed" (PEP 668)
  if "$py" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
    flags+=(--break-system-packages)
  fi
  "$py" -m pip install "${flags[@]}" ./python
  "$py" -m pytest -q -p no:cacheprovider python/tests "$@"
done
