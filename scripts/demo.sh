#!/usr/bin/env bash
# The README's first command: installs what is missing, builds everything,
# and runs the demo (4 ranks training with cohortrun; a mismatched call; a
# killed worker and an elastic restart).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target cohortrun train >/dev/null
exec scripts/demo-run.sh build
