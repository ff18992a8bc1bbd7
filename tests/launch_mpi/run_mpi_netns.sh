#!/usr/bin/env bash
# run_mpi_netns.sh PROG HELLO [openmpi=MPIPROG] [mpich=MPIPROG] - cohort
# under Open MPI's mpirun and MPICH's mpiexec across two "nodes", with
# nothing exported by hand.
#
# The nodes are network namespaces joined by a veth pair (cn-a 10.215.N.1,
# cn-b 10.215.N.2); the script runs in mount and UTS namespaces of its own
# whose /etc/hosts names them and whose host name is cn-a, where the
# launchers run. There is no ssh: both launchers start their remote daemon
# (orted, hydra_pmi_proxy) through an agent script that does what ssh would,
# "on" the other node: nsenter into its network namespace, a UTS namespace
# named cn-b, sh -c the command (Open MPI: --mca plm_rsh_agent, MPICH:
# -launcher ssh -launcher-exec). Then, with MASTER_ADDR, MASTER_PORT,
# COHORT_TOKEN and COHORT_STORE unset:
#   1. mpirun -H cn-a:2,cn-b:2 -np 4 PROG: four ranks, two per node, correct
#      all_reduce sums; the job's token on no process's command line or in
#      its environment (every rank scans /proc); no token file written
#   2. the same with COHORT_PMI=off: the clear error naming what to set
#   3. mpiexec.mpich -hosts cn-a:2,cn-b:2 -n 4 PROG: as 1
#   4. the same with COHORT_PMI=off: the clear error
#   5. both launchers on one node (cn-a:4) with HELLO: init + barrier
#   6. MPIPROG, the same program calling MPI_Init first and linked with that
#      launcher's MPI: cohort leaves the PMI to MPI, so across nodes init
#      fails naming the MPI library and MASTER_ADDR; with MASTER_ADDR (and
#      MASTER_PORT for MPICH) and COHORT_TOKEN exported it runs
# Exit 77 (skip) without root, namespaces or either MPI; a missing one of
# the two skips its cases only. Run under flock /tmp/cohort-netns.lock.
set -u
PROG=$(readlink -f "${1:?usage: run_mpi_netns.sh PROG HELLO}")
HELLO=$(readlink -f "${2:?usage: run_mpi_netns.sh PROG HELLO}")
MPIPROG_openmpi= MPIPROG_mpich=
for a in "${@:3}"; do
  case $a in
    openmpi=*) MPIPROG_openmpi=$(readlink -f "${a#*=}") ;;
    mpich=*) MPIPROG_mpich=$(readlink -f "${a#*=}") ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (namespaces)"; exit 77; }
for b in ip unshare nsenter flock; do
  command -v $b >/dev/null || { echo "SKIP: $b not installed"; exit 77; }
done
HAVE_OMPI=0 HAVE_MPICH=0
command -v mpirun.openmpi >/dev/null && HAVE_OMPI=1
command -v mpiexec.mpich >/dev/null && HAVE_MPICH=1
[ $HAVE_OMPI = 1 ] || [ $HAVE_MPICH = 1 ] || { echo "SKIP: neither Open MPI nor MPICH"; exit 77; }
if [ -z "${CMN_IN_NS:-}" ]; then
  CMN_IN_NS=1 exec flock /tmp/cohort-netns.lock unshare --mount --uts --propagation private \
    "$0" "$@"
fi

T=$(mktemp -d /tmp/cohort-mpinet.XXXXXX)
NET=10.215.$((RANDOM % 250)) NSA=cmna$$ NSB=cmnb$$
cleanup() {
  umount /etc/hosts 2>/dev/null
  ip netns del $NSA 2>/dev/null
  ip netns del $NSB 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

. "$(dirname "$(readlink -f "$0")")/../support/netns_stale.sh"
netns_stale cmna cmnb cmv # a killed run's namespaces and veths
ip netns add $NSA && ip netns add $NSB || { echo "SKIP: no network namespaces"; exit 77; }
ip link add cmv$$a type veth peer name cmv$$b &&
  ip link set cmv$$a netns $NSA && ip link set cmv$$b netns $NSB &&
  ip -n $NSA link set cmv$$a name eth0 && ip -n $NSB link set cmv$$b name eth0 &&
  ip -n $NSA addr add $NET.1/24 dev eth0 && ip -n $NSB addr add $NET.2/24 dev eth0 &&
  for ns in $NSA $NSB; do ip -n $ns link set eth0 up && ip -n $ns link set lo up || exit 1; done ||
  fail "veth pair"
printf '127.0.0.1 localhost\n%s cn-a\n%s cn-b\n' $NET.1 $NET.2 > "$T/hosts"
mount --bind "$T/hosts" /etc/hosts || { echo "SKIP: cannot bind-mount /etc/hosts"; exit 77; }
hostname cn-a || { echo "SKIP: cannot set the host name in a UTS namespace"; exit 77; }

# The "ssh" of both launchers: [options] HOST COMMAND... (ssh's -x too).
cat > "$T/agent" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
h=\$1; shift
case \$h in
  cn-a) ns=$NSA ;;
  cn-b) ns=$NSB ;;
  *) echo "agent: unknown host \$h" >&2; exit 255 ;;
esac
# nsenter, not "ip netns exec" (that one remounts /sys)
exec nsenter --net=/run/netns/\$ns unshare --uts sh -c "hostname \$h; \$*"
AGENT
chmod +x "$T/agent"
on_a() { nsenter --net=/run/netns/$NSA "$@"; }

unset MASTER_ADDR MASTER_PORT COHORT_TOKEN COHORT_STORE COHORT_JOB_ID RANK WORLD_SIZE LOCAL_RANK \
  LOCAL_WORLD_SIZE COHORT_PMI
mkdir -m 700 "$T/tokens"
export COHORT_TOKEN_DIR=$T/tokens COHORT_TIMEOUT=30

# Four "sum ok" lines, two per node, the token nowhere, no token file.
check_ok() { # what output rc
  echo "$2"
  [ "$3" = 0 ] || fail "$1 exited $3"
  [ "$(grep -c 'sum ok, token in no cmdline or environment' <<<"$2")" = 4 ] ||
    fail "$1: not 4 ranks with correct sums and the token on no command line"
  [ "$(grep -c ' on cn-a: sum ok' <<<"$2")" = 2 ] && [ "$(grep -c ' on cn-b: sum ok' <<<"$2")" = 2 ] ||
    fail "$1: ranks not two per node"
  [ -z "$(ls -A "$T/tokens")" ] || fail "$1: token file written: $(ls -A "$T/tokens")"
}

OMPI="mpirun.openmpi --allow-run-as-root --mca plm_rsh_agent $T/agent"
if [ $HAVE_OMPI = 1 ]; then
  out=$(on_a timeout 120 $OMPI -H cn-a:2,cn-b:2 -np 4 "$PROG" 2>&1); rc=$?
  check_ok "mpirun across two nodes" "$out" $rc
  echo "mpirun across two nodes: ok"

  out=$(on_a timeout 120 $OMPI -x COHORT_PMI=off -H cn-a:2,cn-b:2 -np 4 "$PROG" 2>&1); rc=$?
  echo "$out" | head -5
  [ $rc != 0 ] || fail "mpirun with COHORT_PMI=off exited 0"
  grep -q "set MASTER_ADDR.*no launcher PMI: COHORT_PMI=off\|no launcher PMI: COHORT_PMI=off.*set MASTER_ADDR" <<<"$out" ||
    fail "mpirun with COHORT_PMI=off: not the error naming MASTER_ADDR and COHORT_PMI=off"
  echo "mpirun across two nodes, COHORT_PMI=off: the clear error"

  out=$(on_a timeout 120 $OMPI -H cn-a:4 -np 4 "$HELLO" 2>&1); rc=$?
  [ $rc = 0 ] || fail "mpirun on one node exited $rc: $out"
  echo "mpirun on one node: ok"

  if [ -n "$MPIPROG_openmpi" ]; then
    out=$(on_a timeout 120 $OMPI -H cn-a:2,cn-b:2 -np 4 "$MPIPROG_openmpi" 2>&1); rc=$?
    echo "$out" | head -3
    [ $rc != 0 ] || fail "an MPI program under mpirun across nodes did not need MASTER_ADDR"
    grep -q "MPI library loaded (libmpi.*set MASTER_ADDR" <<<"$out" ||
      fail "MPI program under mpirun: not the error naming the MPI library and MASTER_ADDR"
    out=$(MASTER_ADDR=cn-a COHORT_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n') \
      on_a timeout 120 $OMPI -x MASTER_ADDR -x COHORT_TOKEN -H cn-a:2,cn-b:2 -np 4 \
      "$MPIPROG_openmpi" exported 2>&1); rc=$?
    echo "$out"
    [ $rc = 0 ] && [ "$(grep -c ': sum ok' <<<"$out")" = 4 ] ||
      fail "MPI program under mpirun with MASTER_ADDR and COHORT_TOKEN exported exited $rc"
    echo "an MPI program under mpirun across nodes: the clear error, and runs with the exports"
  fi
fi

MPICH="mpiexec.mpich -launcher ssh -launcher-exec $T/agent"
if [ $HAVE_MPICH = 1 ]; then
  out=$(on_a timeout 120 $MPICH -hosts cn-a:2,cn-b:2 -n 4 "$PROG" 2>&1); rc=$?
  check_ok "mpiexec.mpich across two nodes" "$out" $rc
  echo "mpiexec.mpich across two nodes: ok"

  out=$(on_a timeout 120 $MPICH -genv COHORT_PMI off -hosts cn-a:2,cn-b:2 -n 4 "$PROG" 2>&1); rc=$?
  echo "$out" | head -5
  [ $rc != 0 ] || fail "mpiexec.mpich with COHORT_PMI=off exited 0"
  grep -q "no launcher PMI: COHORT_PMI=off" <<<"$out" ||
    fail "mpiexec.mpich with COHORT_PMI=off: not the error naming COHORT_PMI=off"
  echo "mpiexec.mpich across two nodes, COHORT_PMI=off: the clear error"

  out=$(on_a timeout 120 $MPICH -hosts cn-a:4 -n 4 "$HELLO" 2>&1); rc=$?
  [ $rc = 0 ] || fail "mpiexec.mpich on one node exited $rc: $out"
  echo "mpiexec.mpich on one node: ok"

  if [ -n "$MPIPROG_mpich" ]; then
    out=$(on_a timeout 120 $MPICH -hosts cn-a:2,cn-b:2 -n 4 "$MPIPROG_mpich" 2>&1); rc=$?
    echo "$out" | head -3
    [ $rc != 0 ] || fail "an MPI program under mpiexec across nodes did not need MASTER_ADDR"
    grep -q "MPI library loaded (libmpi.*set MASTER_ADDR" <<<"$out" ||
      fail "MPI program under mpiexec: not the error naming the MPI library and MASTER_ADDR"
    out=$(MASTER_ADDR=cn-a MASTER_PORT=$((20000 + RANDOM % 10000)) \
      COHORT_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n') \
      on_a timeout 120 $MPICH -hosts cn-a:2,cn-b:2 -n 4 "$MPIPROG_mpich" exported 2>&1); rc=$?
    echo "$out"
    [ $rc = 0 ] && [ "$(grep -c ': sum ok' <<<"$out")" = 4 ] ||
      fail "MPI program under mpiexec with MASTER_ADDR/PORT and COHORT_TOKEN exported exited $rc"
    echo "an MPI program under mpiexec across nodes: the clear error, and runs with the exports"
  fi
fi
echo "mpi launchers: all passed"
