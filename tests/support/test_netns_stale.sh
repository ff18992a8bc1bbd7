#!/usr/bin/env bash
# test_netns_stale.sh - netns_stale (netns_stale.sh) removes what a killed
# run left (its pid gone: a namespace, a root-namespace veth pair) and never
# a live run's. Exit 77 without root or iproute2.
set -u
[ "$(id -u)" = 0 ] && command -v ip >/dev/null || { echo "SKIP: needs root and iproute2"; exit 77; }
. "$(dirname "$(readlink -f "$0")")/netns_stale.sh"
sleep 30 & live=$!          # a live "run"
sh -c 'exit 0' & dead=$!; wait $dead   # a gone one
pre=cohst                   # this test's own prefix
fail() { echo "FAIL: $*"; cleanup; exit 1; }
cleanup() {
  kill $live 2>/dev/null
  for n in $pre${dead}n0 $pre${live}n0; do ip netns del $n 2>/dev/null; done
  ip link del $pre${dead}a 2>/dev/null; ip link del $pre${live}a 2>/dev/null
}
ip netns add $pre${dead}n0 && ip netns add $pre${live}n0 || { echo "SKIP: cannot add namespaces"; cleanup; exit 77; }
ip link add $pre${dead}a type veth peer name $pre${dead}b &&
  ip link add $pre${live}a type veth peer name $pre${live}b || fail "veth pairs"
netns_stale $pre
[ -e /run/netns/$pre${dead}n0 ] && fail "the dead run's namespace is left"
ip link show $pre${dead}a >/dev/null 2>&1 && fail "the dead run's veth is left"
[ -e /run/netns/$pre${live}n0 ] || fail "the live run's namespace was removed"
ip link show $pre${live}a >/dev/null 2>&1 || fail "the live run's veth was removed"
cleanup
echo "ok: removed pid $dead's namespace and veth, kept pid $live's"
