# bench/compare/hoststate.sh - the host-state probe that bench/mpi/run.sh and
# bench/torch/run.sh put around each launch (sourced): the machine's
# core-to-core round trip, the median of bench/compare/c2c.c in ns. On the
# shared VM it moves between states (about 55 / 140 / 550 ns) that scale
# every hand-off between ranks; hoststate.py classifies the probes.

# hoststate_build DIR: builds c2c into DIR.
hoststate_build() {
  HOSTSTATE_C2C=$1/c2c
  gcc -std=c11 -O2 -Wall -Wextra -Werror -pthread -o "$HOSTSTATE_C2C" \
    "$(dirname "${BASH_SOURCE[0]}")/c2c.c"
}

# xcore: one probe's median round trip, or "-" when it got no answer (c2c
# exits 1 when no batch completes in its 0.3 s window, as under heavy load):
# a probe never fails the run (set -e, pipefail).
xcore() { { "$HOSTSTATE_C2C" 2>/dev/null || true; } | awk '$4 ~ /^[0-9]+$/ {print $4; ok = 1} END {if (!ok) print "-"}'; }
