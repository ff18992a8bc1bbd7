#!/usr/bin/env bash
# run_slurm.sh PROG - cohort under a real Slurm on this machine.
#
# Starts munged (private socket and key), slurmctld and two slurmd "nodes"
# cn1 and cn2 (one machine, distinct ports, slurmd -N), all configured from
# a temporary directory. The script runs in a mount namespace of its own
# where /etc/hosts also names cn1 (127.0.0.1) and cn2 (127.0.0.2), so node
# names resolve as on a cluster without touching the machine's files.
# With NETNS=1 each slurmd runs in a network namespace of its own (cn1
# 10.213.N.1, cn2 10.213.N.2, slurmctld and srun in a hub namespace whose
# bridge joins them), so cohort sees two hosts and goes over TCP between
# them, as on a real cluster (run under flock /tmp/cohort-netns.lock).
# Then:
#   1. srun -N 2 -n 4 PROG ok         - correct results, tasks on both nodes,
#                                       no MASTER_ADDR/COHORT_TOKEN exported,
#                                       no token file left behind; again
#                                       with COHORT_TRANSPORT=tcp; again
#                                       with --mpi=pmi2 (the token through
#                                       Slurm's PMI, no file)
#   2. srun -N 2 -n 4 PROG mismatch   - COHORT_ERR_CONTRACT on every rank
#   3. srun -N 2 -n 4 PROG kill       - rank 2 killed: the others get
#                                       COHORT_ERR_PEER_LOST naming rank 2 and
#                                       the step ends (bounded)
#   4. sbatch --wait -N 2 -n 4: a batch script running PROG alone (a world
#      of one: the batch script is not task 0 of 4) and srun PROG
# and stops every daemon it started, whatever happens. Exit 77 (skip) when
# not root or Slurm/munge are not installed.
set -u
PROG=$(readlink -f "${1:?usage: run_slurm.sh PROG}")
for b in munged slurmctld slurmd srun sbatch sinfo scontrol; do
  command -v $b >/dev/null || { echo "SKIP: $b not installed (scripts/deps.sh test)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (slurmd)"; exit 77; }
NETNS=${NETNS:-0}
if [ -z "${CST_IN_NS:-}" ]; then
  command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 77; }
  if [ "$NETNS" = 1 ]; then
    CST_IN_NS=1 exec flock /tmp/cohort-netns.lock unshare --mount --propagation private "$0" "$@"
  fi
  CST_IN_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi

T=$(mktemp -d /tmp/cohort-slurm.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  # a slurmstepd whose slurmd went first outlives it: ours carry job ids
  # from our own range ("slurmstepd: [J.S]", J >= FIRST)
  for d in /proc/[0-9]*; do
    read -r cmd < "$d/cmdline" 2>/dev/null || continue
    case "$cmd" in slurmstepd:*) ;; *) continue ;; esac
    j=${cmd#*[}; j=${j%%.*}
    [ -n "${FIRST:-}" ] && [ "$j" -ge "$FIRST" ] 2>/dev/null && [ "$j" -lt $((FIRST + 1000)) ] &&
      kill -9 "${d#/proc/}" 2>/dev/null
  done
  umount /etc/hosts 2>/dev/null
  if [ "$NETNS" = 1 ]; then for ns in $HUB $NSA $NSB; do ip netns del $ns 2>/dev/null; done; fi
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$T"/log/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

# Free TCP ports for slurmctld and the two slurmd.
read -r P0 P1 P2 P3 < <(python3 -c '
import socket
s=[socket.socket() for _ in range(4)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
H=$(hostname)
N1=cn1 N2=cn2
# Where the nodes live: loopback (two addresses) or two namespaces on a bridge.
A1=127.0.0.1 A2=127.0.0.2 CTL=127.0.0.1 HUB= NSA= NSB=
in_hub() { "$@"; }
if [ "$NETNS" = 1 ]; then
  NET=10.213.$((RANDOM % 250)) HUB=cslh$$ NSA=csla$$ NSB=cslb$$
  A1=$NET.1 A2=$NET.2 CTL=$NET.254
  . "$(dirname "$(readlink -f "$0")")/../support/netns_stale.sh"
  netns_stale cslh csla cslb csv # a killed run's namespaces and veths
  ip netns add $HUB && ip netns add $NSA && ip netns add $NSB || { echo "SKIP: no network namespaces"; exit 77; }
  ip -n $HUB link add csbr type bridge && ip -n $HUB addr add $CTL/24 dev csbr &&
    ip -n $HUB link set csbr up && ip -n $HUB link set lo up || fail "hub bridge"
  i=0
  for ns in $NSA $NSB; do
    i=$((i + 1))
    ip link add csv$$x$i type veth peer name csv$$y$i &&
      ip link set csv$$x$i netns $ns && ip link set csv$$y$i netns $HUB &&
      ip -n $ns link set csv$$x$i name eth0 && ip -n $ns addr add $NET.$i/24 dev eth0 &&
      ip -n $ns link set eth0 up && ip -n $ns link set lo up &&
      ip -n $HUB link set csv$$y$i master csbr && ip -n $HUB link set csv$$y$i up || fail "veth $ns"
  done
  # nsenter, not "ip netns exec": that one remounts /sys, hiding the
  # cgroup filesystem slurmd needs
  in_hub() { nsenter --net=/run/netns/$HUB "$@"; }
fi

mkdir -p "$T"/{state,log,munge,spool/$N1,spool/$N2,tokens,out}
if [ "$NETNS" = 1 ]; then
  # the hub (slurmctld, srun) answers to the host name, as a login node would
  printf '127.0.0.1 localhost\n%s %s\n%s %s\n%s %s\n' $CTL "$H" $A1 $N1 $A2 $N2 > "$T/hosts"
else
  { cat /etc/hosts; echo "$A1 $N1"; echo "$A2 $N2"; } > "$T/hosts"
fi
mount --bind "$T/hosts" /etc/hosts || { echo "SKIP: cannot bind-mount /etc/hosts"; exit 77; }
getent hosts $N2 >/dev/null || fail "$N2 does not resolve in the namespace"
chmod 711 "$T/munge"; chmod 700 "$T/tokens"
head -c 1024 /dev/urandom > "$T/munge/munge.key"; chmod 600 "$T/munge/munge.key"
munged --force -S "$T/munge/sock" --key-file="$T/munge/munge.key" --log-file="$T/log/munged.log" \
  --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/seed" || fail "munged did not start"
PIDS+=("$(cat "$T/munge/munged.pid")")

NH1=$H NH2=$H
[ "$NETNS" = 1 ] && NH1=$N1 NH2=$N2
# A job id range of our own: ports derived from job ids differ between runs.
FIRST=$(( (RANDOM << 8 | RANDOM & 255) % 5000000 + 1000 ))
cat > "$T/slurm.conf" <<CONF
ClusterName=cohtest
SlurmctldHost=$H($CTL)
SlurmctldPort=$P0
SlurmdPort=$P1
AuthType=auth/munge
AuthInfo=socket=$T/munge/sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.%n.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
FirstJobId=$FIRST
KillWait=2
MinJobAge=2
InactiveLimit=0
NodeName=$N1 NodeHostname=$NH1 NodeAddr=$A1 Port=$P2 CPUs=2 State=UNKNOWN
NodeName=$N2 NodeHostname=$NH2 NodeAddr=$A2 Port=$P3 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=$N1,$N2 Default=YES MaxTime=5 State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$T/slurm.conf
in_hub slurmctld -f "$SLURM_CONF" -c || fail "slurmctld did not start"
for _ in $(seq 50); do [ -s "$T/slurmctld.pid" ] && break; sleep 0.1; done
PIDS+=("$(cat "$T/slurmctld.pid")")
for n in $N1 $N2; do
  if [ "$NETNS" = 1 ]; then
    ns=$NSA; [ $n = $N2 ] && ns=$NSB
    nsenter --net=/run/netns/$ns slurmd -f "$SLURM_CONF" -N $n || fail "slurmd $n did not start"
  else
    slurmd -f "$SLURM_CONF" -N $n || fail "slurmd $n did not start"
  fi
  for _ in $(seq 50); do [ -s "$T/slurmd.$n.pid" ] && break; sleep 0.1; done
  PIDS+=("$(cat "$T/slurmd.$n.pid")")
done
for i in $(seq 100); do
  [ "$(in_hub sinfo -h -N -o %T 2>/dev/null | grep -c idle)" = 2 ] && break
  [ $i = 100 ] && fail "nodes not idle after 10 s: $(in_hub sinfo -N 2>&1)"
  sleep 0.1
done
echo "slurm up: nodes $N1 ($A1) $N2 ($A2), slurmctld $CTL (ports $P0 $P1 $P2 $P3), first job id $FIRST"

# What the job must not need: exported by hand.
unset MASTER_ADDR MASTER_PORT COHORT_TOKEN COHORT_STORE RANK WORLD_SIZE LOCAL_RANK
export COHORT_TOKEN_DIR=$T/tokens COHORT_TIMEOUT=20

# 1. correct results, on both nodes
out=$(in_hub timeout 60 srun -N 2 -n 4 "$PROG" ok 2>&1); rc=$?
echo "$out"
[ $rc = 0 ] || fail "srun ok exited $rc"
[ "$(grep -c 'sum ok' <<<"$out")" = 4 ] || fail "not 4 'sum ok' lines"
grep -q "node $N1: sum ok" <<<"$out" && grep -q "node $N2: sum ok" <<<"$out" || fail "tasks not on both nodes"
[ -z "$(ls -A "$T/tokens")" ] || fail "token file left: $(ls -A "$T/tokens")"
# ... and over TCP between the nodes' addresses (cn1 127.0.0.1, cn2 127.0.0.2)
out=$(COHORT_TRANSPORT=tcp in_hub timeout 60 srun -N 2 -n 4 "$PROG" ok 2>&1); rc=$?
echo "$out"
[ $rc = 0 ] && [ "$(grep -c 'sum ok' <<<"$out")" = 4 ] || fail "srun ok over tcp exited $rc"

# ... and with Slurm's PMI-2 plugin: the token through the step's PMI server
# (its PMI-1 wire), not a file (an unusable COHORT_TOKEN_DIR proves it).
# --mpi=pmix is not run: both slurmd "nodes" share /tmp here, and the
# plugin's per-step directory there collides ("File exists").
for mpi in pmi2; do
  out=$(COHORT_TOKEN_DIR=/proc/no-such-dir in_hub timeout 60 srun --mpi=$mpi -N 2 -n 4 "$PROG" ok 2>&1); rc=$?
  echo "$out"
  [ $rc = 0 ] && [ "$(grep -c 'sum ok' <<<"$out")" = 4 ] || fail "srun --mpi=$mpi ok exited $rc"
done

# 2. a mismatch, caught on every rank
out=$(in_hub timeout 60 srun -N 2 -n 4 "$PROG" mismatch 2>&1); rc=$?
echo "$out"
[ $rc != 0 ] || fail "srun mismatch exited 0"
[ "$(grep -c 'COHORT_ERR_CONTRACT' <<<"$out")" -ge 4 ] || fail "not every rank reported the contract error"
for r in 0 1 2 3; do grep -q "^rank $r: COHORT_ERR_CONTRACT" <<<"$out" || fail "rank $r did not report it"; done
grep -q "count differs" <<<"$out" || fail "no 'count differs' in the reports"

# 3. a killed task ends the step: the others see PEER_LOST naming rank 2
t0=$(date +%s)
out=$(in_hub timeout 60 srun -N 2 -n 4 "$PROG" kill 2>&1); rc=$?
t1=$(date +%s)
echo "$out"
[ $rc != 0 ] && [ $rc != 124 ] || fail "srun kill exited $rc (124: the step did not end)"
[ $((t1 - t0)) -le 30 ] || fail "the step took $((t1 - t0)) s to end"
for r in 0 1 3; do grep -q "^rank $r: COHORT_ERR_PEER_LOST" <<<"$out" || fail "rank $r did not report PEER_LOST"; done
grep -q "rank 2" <<<"$(grep PEER_LOST <<<"$out")" || fail "PEER_LOST does not name rank 2"

# 4. sbatch: the batch script alone is a world of one; srun in it is 4 ranks
cat > "$T/job.sh" <<JOB
#!/bin/sh
"$PROG" ok || exit 10
srun "$PROG" ok || exit 11
JOB
chmod +x "$T/job.sh"
in_hub timeout 90 sbatch --wait -N 2 -n 4 -o "$T/out/job.out" "$T/job.sh" >/dev/null; rc=$?
cat "$T/out/job.out"
[ $rc = 0 ] || fail "sbatch job exited $rc"
grep -q "rank 0 of 1 on .*: sum ok" "$T/out/job.out" || fail "batch script alone was not a world of one"
[ "$(grep -c 'of 4 on .*: sum ok' "$T/out/job.out")" = 4 ] || fail "srun in the batch job: not 4 ranks ok"
[ -z "$(ls -A "$T/tokens")" ] || fail "token file left after sbatch: $(ls -A "$T/tokens")"
echo "slurm: all passed"
