#!/usr/bin/env bash
# Unchanged torch.distributed programs (gloo; env:// and an explicit
# TCPStore on MASTER_ADDR:MASTER_PORT) under cohortrun: rank 0 binds
# MASTER_PORT itself, so cohortrun must leave it free (docs/launcher.md,
# "torch.distributed programs"). Before, MASTER_PORT was the launcher's store
# and rank 0 failed with "Address already in use".
#
# usage: torch_under_cohortrun.sh COHORTRUN PYTHON local|netns
#   local: -n 2 and -n 4, env:// and TCPStore, and a restart after a worker
#          is SIGKILLed (--max-restarts 1)
#   netns: two cohortrun nodes in two network namespaces joined by a veth
#          pair (2 x 2 ranks), then the same with a worker of node 1 killed
#          and both nodes restarting
# exit 77: no torch with gloo for PYTHON, or (netns) not root / no iproute2
set -euo pipefail
crun=$1 py=$2 what=$3
here=$(cd "$(dirname "$0")" && pwd)
prog=$here/torch_prog.py
"$py" -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' \
  2>/dev/null || { echo "no torch with gloo for $py: skipped"; exit 77; }
ver=$("$py" -c 'import torch; print(torch.__version__)')
if [ "$what" = netns ] && [ -z "${CTQ_LOCKED:-}" ]; then
  # one namespace test at a time on this machine (they are timing-sensitive)
  CTQ_LOCKED=1 exec flock /tmp/cohort-netns.lock "$0" "$@"
fi
tmp=$(mktemp -d)
# names of this run only: another run of this test (another build tree)
# must not enter or delete our namespaces
ns0=cohtq$$a ns1=cohtq$$b
cleanup() {
  if [ "$what" = netns ]; then ip netns del $ns0 2>/dev/null || true; ip netns del $ns1 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
export OMP_NUM_THREADS=1 TORCH_CPP_LOG_LEVEL=ERROR PYTHONDONTWRITEBYTECODE=1
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK COHORT_STORE COHORT_JOB_ID COHORT_TOKEN \
  TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_RESTART_COUNT TORCHELASTIC_RUN_ID

# check NAME OUTPUT WORLD RESTART: every rank printed the right sums
check() {
  local want=$(( $3 * ($3 + 1) / 2 ))
  for ((r = 0; r < $3; r++)); do
    grep -Eq "^(\[$r\] )?torch ok rank $r/$3 sum=$want restart=$4\$" "$2" ||
      { echo "FAIL $1 (torch $ver): rank $r: wrong or missing result"; cat "$2"; exit 1; }
  done
  echo "ok   $1 (torch $ver)"
}

# run NAME WORLD RESTART COHORTRUN-ARGS... -- PROG-ARGS...
run() {
  local name=$1 n=$2 rs=$3; shift 3
  local args=() ; while [ "$1" != -- ]; do args+=("$1"); shift; done; shift
  if ! timeout 240 "$crun" "${args[@]}" "$py" "$prog" "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL $name (torch $ver): cohortrun exited $?"; cat "$tmp/out" "$tmp/err"; exit 1
  fi
  check "$name" "$tmp/out" "$n" "$rs"
}

if [ "$what" = local ]; then
  run "env:// -n 2" 2 0 -n 2 -- env
  run "env:// -n 4" 4 0 -n 4 -- env
  run "TCPStore -n 2" 2 0 -n 2 -- tcp
  run "env:// -n 3, rank 1 SIGKILLed, restarted" 3 1 -n 3 --max-restarts 1 -- env 1
  grep -q "restart 1 of 1, generation 2" "$tmp/err" ||
    { echo "FAIL restart: no restart notice"; cat "$tmp/err"; exit 1; }
  run "TCPStore -n 2, rank 0 SIGKILLed, restarted" 2 1 -n 2 --max-restarts 1 -- tcp 0
  exit 0
fi

[ "$(id -u)" = 0 ] && command -v ip >/dev/null || { echo "netns: needs root and iproute2: skipped"; exit 77; }
. "$here/../support/netns_stale.sh"
netns_stale cohtq # a killed run's namespaces
ip netns add $ns0 && ip netns add $ns1 || { echo "netns: cannot create namespaces: skipped"; exit 77; }
ip -n $ns0 link set lo up; ip -n $ns1 link set lo up
ip -n $ns0 link add eth0 type veth peer name eth0 netns $ns1
ip -n $ns0 addr add 10.214.7.1/24 dev eth0; ip -n $ns1 addr add 10.214.7.2/24 dev eth0
ip -n $ns0 link set eth0 up; ip -n $ns1 link set eth0 up
# gloo picks its interface from the hostname, which names no address here:
# name it, as on a cluster node with several interfaces.
export GLOO_SOCKET_IFNAME=eth0 COHORT_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

# nodes NAME RESTART NODE-ARGS -- PROG-ARGS...: two cohortruns, one per namespace
nodes() {
  local name=$1 rs=$2; shift 2
  local args=() ; while [ "$1" != -- ]; do args+=("$1"); shift; done; shift
  local job=tq-$$-$RANDOM
  for k in 0 1; do
    [ $k = 0 ] && ns=$ns0 || ns=$ns1
    timeout 240 ip netns exec $ns "$crun" --nnodes 2 --node-rank $k -n 2 --job-id $job \
      --master 10.214.7.1:29400 --join-timeout-ms 60000 "${args[@]}" "$py" "$prog" "$@" \
      >"$tmp/out$k" 2>"$tmp/err$k" &
    eval "pid$k=\$!"
  done
  local rc0=0 rc1=0
  wait "$pid0" || rc0=$?
  wait "$pid1" || rc1=$?
  if [ $rc0 != 0 ] || [ $rc1 != 0 ]; then
    echo "FAIL $name (torch $ver): cohortrun exited $rc0 / $rc1"
    cat "$tmp/out0" "$tmp/err0" "$tmp/out1" "$tmp/err1"; exit 1
  fi
  cat "$tmp/out0" "$tmp/out1" >"$tmp/out"
  check "$name" "$tmp/out" 4 "$rs"
  # every rank of a generation was given node 0's address
  if grep -q "MASTER_ADDR" "$tmp/err0" "$tmp/err1"; then cat "$tmp/err0" "$tmp/err1"; exit 1; fi
}
nodes "two nodes (netns), env://" 0 -- env
nodes "two nodes (netns), TCPStore" 0 -- tcp
nodes "two nodes (netns), rank 3 SIGKILLed, both nodes restarted" 1 --max-restarts 1 -- env 3
