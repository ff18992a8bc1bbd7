#!/usr/bin/env bash
# PyTorch's own store tests (test/distributed/test_store.py, the TCPStore
# cases) against cohort-store's TCPStore listener. Not part of scripts/test.sh:
# it needs a copy of PyTorch's source, given by path (nothing of it is copied
# into this repository). Results: docs/torch-store.md#torchs-own-tests.
#
# usage: scripts/torch-store-suite.sh PYTORCH_SOURCE [PYTHON...]
#   PYTHON: interpreters to run it with (default: python3 on PATH)
# Builds cohort-store in build/ if it is not there. Log of the servers:
# $COHORT_SUITE_LOG (default /dev/null).
set -euo pipefail
src=${1:?usage: scripts/torch-store-suite.sh PYTORCH_SOURCE [PYTHON...]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
test_py=$src/test/distributed/test_store.py
[ -f "$test_py" ] || { echo "no $test_py" >&2; exit 2; }
store=$here/build/tools/cohort-store/cohort-store
if [ ! -x "$store" ]; then
  cmake -S "$here" -B "$here/build" -DCOHORT_FUZZ=OFF >/dev/null
  cmake --build "$here/build" -j"$(nproc)" --target cohort-store >/dev/null
fi
pys=("$@")
[ ${#pys[@]} -gt 0 ] || pys=(python3)
rc=0
for py in "${pys[@]}"; do
  # torch's test helpers import expecttest (PyPI only).
  "$py" -c 'import expecttest' 2>/dev/null || "$py" -m pip install -q expecttest ||
    { echo "$py: cannot install expecttest" >&2; rc=1; continue; }
  echo "== $py: $("$py" -c 'import torch; print(torch.__version__)')"
  (cd "$src" && "$py" "$here/scripts/torch_store_suite.py" "$store" "$test_py") 2>/dev/null || rc=1
done
exit $rc
