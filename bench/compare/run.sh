#!/bin/bash
# bench/compare/run.sh - cohort side by side with Open MPI, MPICH and Gloo on
# this machine, in one run, interleaved (cohort, peer, cohort, peer, ... per
# configuration) so that drift of a noisy machine hits every library alike.
#
#   bench/compare/run.sh                 the full comparison (about an hour on 2 cores)
#   QUICK=1 bench/compare/run.sh         smoke run: 1 launch, 3 sizes, short timing (a few minutes)
#   PRESET=issue14 bench/compare/run.sh  every target of issue #14 at >= 5 launches per
#                                        cell, every collective (OPS=all), ~70 minutes on 2 cores
#   PRESET=issue14 QUICK=1 bench/compare/run.sh   the preset's configurations once, QUICK-sized
#   CONFIGS="shm2 contract" bench/compare/run.sh     only some configurations
#
# Environment:
#   REPS=5           launches per library and configuration (medians are taken over them)
#   T=0.2            seconds timed per size (cohort-perf --time, mpi_coll_bench -t, gloo_bench -t)
#   CONFIGS="memcpy shm2 shm2osu over4 over4osu over8 over8osu over16 over16osu tcp2 tcp2osu
#            tcp4 tcp4osu netns2 netns2osu netns4 netns4osu contract memory"
#   SIZES=8,16,64,...,67108864   bytes (nccl-tests convention: the full buffer)
#   OPS=broadcast    only these collectives (cohort's names, comma-separated). Default: the
#                    five the shared peer harness has (all_reduce broadcast all_gather
#                    reduce_scatter barrier). all_to_all, gather, scatter, reduce (root 0)
#                    and sendrecv (ping-pong of ranks 2k, 2k+1, one way) only when named:
#                    OPS=ext for the five, OPS=all for all ten (PRESET=issue14's
#                    default). The MPIs
#                    run them through bench/compare/mpi_coll_ext.c (same timing, same
#                    rows, a second mpirun in the same slot: <lib>.<launch>.ext.txt);
#                    Gloo has none of them
#   RESULTS=DIR      where results go (default bench/compare/results/<date>)
#   COHORT_PERF=PATH the cohort-perf binary (default build/tools/cohort-perf/cohort-perf)
#   PEERS_SRC=DIR    the peer harness, copied to a temp dir (default /work/shared/peers/coll)
#   LAUNCH_TIMEOUT=900   seconds before one launch is killed
#   GLOO=1           0: leave Gloo out of shm2 (the shm targets compare with the MPIs)
#   BIND=            cohort-perf --bind for every cohort launch: none|auto|core. Unset:
#                    cohort's default (none; auto: a core per rank while the ranks fit on
#                    the cores, none when oversubscribed, as Open MPI's mpirun). Each launch's
#                    file records what every rank got ("# cohort: binding") and, per row,
#                    where each rank ran ("# sched:", cohort-perf --sched)
#                    netns2/netns4: core or auto binds rank i to core i by taskset where the
#                    ranks fit the cores (each namespace "host" has a local rank 0)
#   NICE=0           niceness of every launch (all libraries alike); e.g. NICE=-5 on a
#                    machine shared with other work (root only for negative values)
#   MPICH_OVER_OSU=0 1: MPICH also in over4osu/over8osu (minutes per launch: its ranks
#                    busy-poll, four or eight on two cores, with a barrier per iteration)
#   QUIET_BUSY=20 QUIET_WAIT=120   before each launch, wait up to QUIET_WAIT s for
#                    the machine to be under QUIET_BUSY % busy (it is shared)
#
# Configurations:
#   memcpy    one memcpy of 1 MiB (memcpy_floor.c), once per round: the floor of a single copy
#   shm2      2 ranks, shared memory: cohort, Open MPI (vader), MPICH (ch4:ucx, UCX's shm), Gloo (TCP)
#   shm2heap  2 ranks, shared memory, cohort-perf under libcohort-heap.so (cohortrun --heap): the
#             program's own buffers shared; cohort only, against memcpy (shm2heaposu: OSU style)
#   over4/8   4 and 8 ranks on the 2 cores (oversubscribed): cohort, Open MPI (--oversubscribe),
#             MPICH (the shm target at 4 and 8 ranks is against the best of the two MPIs)
#   over16    16 ranks on the 2 cores: cohort, Open MPI
#   *osu      (shm2osu, over4osu, over8osu, over16osu, tcp2osu, tcp4osu, netns2osu,
#             netns4osu) the same, OSU style: a barrier between iterations, the op alone
#             timed (cohort-perf --osu, mpi_coll_bench -o); the others run back to back.
#             Gloo has no OSU mode: it is in the back-to-back configurations only.
#   tcp2/4    TCP over loopback: cohort --transport tcp, Open MPI btl tcp,self on lo, Gloo
#   netns2/4  2 network namespaces joined by a veth pair, the ranks split half and half
#             (two "hosts"): cohort with --transport tcp (TCP inside a namespace too),
#             Open MPI with btl tcp,self on the veth (mpirun in the first namespace starts
#             its daemon in the second through a launch agent, ns_rsh, that runs
#             "ip netns exec" instead of ssh), Gloo (GLOO_SOCKET_IFNAME=coh0)
#   contract  cohort 2 ranks shm, --contract off vs on, interleaved: the check's cost
#   memory    RSS and shared segment per rank at 2, 4, 8 ranks: cohort and Open MPI
#
# What decides each library's speed is recorded with every launch (the header of its
# raw file: load before and after, kernel, ptrace_scope) and in run_info.txt: Open MPI's
# selected pml and btl (its own verbose output, pml_base_verbose/btl_base_verbose, kept
# in the launch's file) and vader's single-copy mechanism (ompi_info, and any warning
# that it fell back); MPICH's device and UCX's transports per endpoint (UCX_LOG_LEVEL=info
# prints "ep_cfg ... tag(sysv/memory cma/memory)"); cohort's transport, algorithm and
# copy path (cohort-perf's "# cohort:" header lines and JSON). `bench/compare/check DIR`
# then prints every target of the performance issue as met or missed.
#
# Output (under RESULTS): raw/<config>/<lib>.<launch>.{txt,json}, compare.md (tables,
# medians, ratios, targets), compare.csv, ratios.csv, memory.csv, plots/*.png
# (bus bandwidth and latency against size, log-log, one line per library).
# SIGINT/SIGTERM stop every launch at once and exit 130/143, the raw files kept: a
# "# stopped:" line in run_info.txt, "# interrupted:" in the launch cut short
# (summarize.py DIR reads them).
set -u
# The whole body is a function, read by bash before it runs: editing this
# file during a run cannot make the running shell read a shifted offset.
main() {
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PERF=${COHORT_PERF:-$ROOT/build/tools/cohort-perf/cohort-perf}
PEERS_SRC=${PEERS_SRC:-/work/shared/peers/coll}
QUICK=${QUICK:-0}
PRESET=${PRESET:-}
case "$PRESET" in
"") ;;
issue14)
    # Every target of issue #14, >= 5 launches per cell (cohort gets one launch per
    # peer per round, so >= 5 either way), all sizes 8 B .. 64 MiB. T is the time
    # per size: 0.03 s keeps 5 rounds of every op near 70 minutes on 2 cores (docs/performance.md
    # "Benchmarks" has the timing); the medians are over launches, each launch's
    # p50/p99 over its own iterations (>= 5 after warmup, at every size). over16osu
    # is left out: no target asks for 16 ranks OSU style. shm2heap/shm2heaposu (cohort
    # alone under libcohort-heap.so, ~5 s a launch) measure the 1 MiB broadcast
    # target for an unchanged program under the heap, which check reports beside the
    # one without it.
    # With QUICK=1: the same configurations at QUICK's launches, sizes and timing
    # (a smoke run of the preset). OPS=all: the shm and TCP targets name every
    # collective Open MPI has, so reduce, gather, scatter, all_to_all and send/recv
    # run too (the MPIs through mpi_coll_ext, Gloo its four); before session 33 the
    # preset ran the five default ops and those cells only in separate OPS= runs.
    if [ "$QUICK" != 1 ]; then REPS=${REPS:-5}; T=${T:-0.03}; fi
    OPS=${OPS:-all}
    CONFIGS=${CONFIGS:-"memcpy shm2 shm2osu shm2heap shm2heaposu over4 over4osu over8 over8osu over16 tcp2 tcp2osu tcp4 tcp4osu netns2 netns2osu netns4 netns4osu contract"}
    QUIET_WAIT=${QUIET_WAIT:-30}
    ;;
*) echo "compare: unknown PRESET=$PRESET (known: issue14)" >&2; exit 2 ;;
esac
if [ "$QUICK" = 1 ]; then
    REPS=${REPS:-1}
    T=${T:-0.01}
    SIZES=${SIZES:-8,65536,1048576}
    LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-180}
    MEMMAX=${MEMMAX:-1048576}
else
    REPS=${REPS:-5}
    T=${T:-0.2}
    SIZES=${SIZES:-8,16,64,256,1024,4096,16384,65536,262144,1048576,4194304,16777216,67108864}
    LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-900}
    MEMMAX=${MEMMAX:-67108864}
fi
CONFIGS=${CONFIGS:-"memcpy shm2 shm2osu over4 over4osu over8 over8osu over16 over16osu tcp2 tcp2osu tcp4 tcp4osu netns2 netns2osu netns4 netns4osu contract memory"}
NICE=${NICE:-0}
OUT=${RESULTS:-$HERE/results/$(date +%Y%m%d-%H%M%S)}
PY=/usr/bin/python3 # Debian's python3 with python3-torch (Gloo)

# The ops every library has (Gloo in torch 1.13 has no reduce_scatter).
COHORT_OPS=all_reduce,broadcast,all_gather,reduce_scatter,barrier
MPI_OPS=allreduce,bcast,allgather,reduce_scatter,barrier
EXT_OPS= # mpi_coll_ext.c's: none by default (OPS names them)
GLOO_OPS=all_reduce,broadcast,all_gather,barrier
# OPS=broadcast,all_reduce: only these (cohort's names; the peers' follow).
# all_to_all, gather, scatter, reduce (root 0) are not in the default: the MPIs run
# them through bench/compare/mpi_coll_ext.c (the shared harness has only the five
# above), Gloo not at all; sendrecv likewise. OPS=all: all ten; OPS=ext: the five.
EXT_ALL=all_to_all,gather,scatter,reduce,sendrecv
case "${OPS:-}" in
all) OPS=$COHORT_OPS,$EXT_ALL ;;
ext) OPS=$EXT_ALL ;;
esac
if [ -n "${OPS:-}" ]; then
    for o in ${OPS//,/ }; do
        case ",$COHORT_OPS,$EXT_ALL," in *",$o,"*) ;;
        *) echo "compare: OPS: unknown collective $o (known: $COHORT_OPS,$EXT_ALL, all, ext)" >&2; exit 2 ;;
        esac
    done
    COHORT_OPS=$OPS
    ops_in() { echo "$OPS" | tr , '\n' | grep -xE "$1" | paste -sd, -; }
    MPI_OPS=$(ops_in 'all_reduce|broadcast|all_gather|reduce_scatter|barrier' |
              sed 's/all_reduce/allreduce/g; s/broadcast/bcast/g; s/all_gather/allgather/g')
    EXT_OPS=$(ops_in 'all_to_all|gather|scatter|reduce|sendrecv' | sed 's/all_to_all/alltoall/g')
    GLOO_OPS=$(ops_in 'all_reduce|broadcast|all_gather|barrier')
    [ -n "$GLOO_OPS" ] || GLOO=0
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI="mpirun.openmpi --oversubscribe"
# Init-time only: which pml and btl Open MPI selected ("selected ob1", "Using vader btl").
# --report-bindings: where mpirun bound each rank (by default 2 ranks to a core each,
# none when oversubscribed) - binding decides small-call latency on a busy machine.
OMPI_VERBOSE="--report-bindings --mca pml_base_verbose 10 --mca btl_base_verbose 30"
OMPI_TCP="--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo"
MPICH="mpirun.mpich"

die() { echo "compare: $*" >&2; exit 2; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# ---- setup ----------------------------------------------------------------

# One command from a fresh clone: the peers and tools (only what is missing),
# then cohort-perf and libcohort-heap.so in build/ unless COHORT_PERF names one.
"$ROOT/scripts/deps.sh" bench || die "scripts/deps.sh bench failed"
if [ -z "${COHORT_PERF:-}" ] && [ ! -x "$PERF" ]; then
    log "building cohort-perf in $ROOT/build"
    cmake -S "$ROOT" -B "$ROOT/build" -DCOHORT_FUZZ=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
        cmake --build "$ROOT/build" -j"$(nproc)" --target cohort-perf cohort-heap >/dev/null ||
        die "building cohort-perf failed"
fi
[ -x "$PERF" ] || die "no cohort-perf at $PERF: build first (cmake -S . -B build && make -C build cohort-perf) or set COHORT_PERF"
[ -d "$PEERS_SRC" ] || die "no peer harness at $PEERS_SRC (set PEERS_SRC)"
for t in mpicc.openmpi mpirun.openmpi mpicc.mpich mpirun.mpich gnuplot; do
    command -v $t >/dev/null || die "$t is not installed"
done
$PY -c 'import torch.distributed' 2>/dev/null || die "$PY cannot import torch.distributed (python3-torch)"

mkdir -p "$OUT/raw" "$OUT/plots" || die "cannot create $OUT"
HEAP_LIB=${COHORT_HEAP_LIB:-$(dirname "$PERF")/../../libcohort-heap.so}
if [[ " ${CONFIGS:-} " == *" shm2heap"* ]] && [ ! -f "$HEAP_LIB" ]; then
    die "no libcohort-heap.so at $HEAP_LIB (set COHORT_HEAP_LIB) for shm2heap/shm2heaposu"
fi
PEERS=$(mktemp -d /tmp/cohort-compare.XXXXXX)
NS_A="" NS_B="" STOPPED="" CURRENT=""
# Every launch runs in the background under timeout(1) (launch, reap below):
# timeout gives the launch a process group of its own and passes a signal on
# to that whole group (mpirun and its daemons, every rank), then SIGKILL
# 10 s later; a signal to this script ends its wait at once.
LAUNCHED=()
stop_launches() {
    local p
    for p in "${LAUNCHED[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${LAUNCHED[@]}"; do wait "$p" 2>/dev/null; done
    # what outlived its timeout (a rank that ignores TERM) goes with its group
    for p in "${LAUNCHED[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
    LAUNCHED=()
}
cleanup() {
    stop_launches
    if [ -n "$STOPPED" ]; then
        [ -n "$CURRENT" ] && echo "# interrupted: SIG$STOPPED stopped this launch" >> "$CURRENT"
        [ -d "$OUT" ] && echo "# stopped: SIG$STOPPED at $(date -Is); the results are partial" >> "$OUT/run_info.txt"
        log "stopped by SIG$STOPPED: partial results in $OUT/raw (bench/compare/summarize.py $OUT summarizes them)"
    fi
    [ -n "$NS_A" ] && ip netns del "$NS_A" 2>/dev/null
    [ -n "$NS_B" ] && ip netns del "$NS_B" 2>/dev/null
    rm -rf "$PEERS"
}
on_signal() { # SIG CODE: stop every launch (cleanup, from the EXIT trap) and exit CODE
    trap '' INT TERM # a second signal must not cut the stopping short
    STOPPED=$1
    exit "$2"
}
trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM

# The peer harness is read-only where it lives: work on a copy.
cp -r "$PEERS_SRC"/. "$PEERS"/ || die "cannot copy $PEERS_SRC"
mkdir -p "$PEERS/bin"
mpicc.openmpi -O2 -Wall -o "$PEERS/bin/mpi_coll_bench.openmpi" "$PEERS/mpi_coll_bench.c" -lm || die "build mpi_coll_bench (Open MPI)"
mpicc.mpich -O2 -Wall -o "$PEERS/bin/mpi_coll_bench.mpich" "$PEERS/mpi_coll_bench.c" -lm || die "build mpi_coll_bench (MPICH)"
# The collectives the shared harness leaves out, measured its way (ours: bench/compare).
mpicc.openmpi -O2 -Wall -o "$PEERS/bin/mpi_coll_ext.openmpi" "$HERE/mpi_coll_ext.c" || die "build mpi_coll_ext (Open MPI)"
mpicc.mpich -O2 -Wall -o "$PEERS/bin/mpi_coll_ext.mpich" "$HERE/mpi_coll_ext.c" || die "build mpi_coll_ext (MPICH)"
mpicc.openmpi -O2 -Wall -o "$PEERS/bin/mpi_mem.openmpi" "$HERE/mpi_mem.c" || die "build mpi_mem"
cc -O2 -Wall -o "$PEERS/bin/memcpy_floor" "$HERE/memcpy_floor.c" || die "build memcpy_floor"
cc -O2 -Wall -pthread -o "$PEERS/bin/c2c" "$HERE/c2c.c" || die "build c2c"
# The machine's floors for small calls between two cores (docs/performance.md,
# "Issue #14: session 15"): a stream of small records, and a two-copy slot ring.
cc -O2 -Wall -pthread -o "$PEERS/bin/ring_stride" "$HERE/ring_stride.c" || die "build ring_stride"
cc -O2 -Wall -pthread -o "$PEERS/bin/slot_floor" "$HERE/slot_floor.c" || die "build slot_floor"
# How far apart the first two cpus are right now (a cache line's round trip,
# ns): on a VM it changes with the host's placement of the vCPUs, and so does
# every hand-off between two ranks; recorded before and after each launch.
c2c_now() { "$PEERS/bin/c2c" 2>/dev/null || echo "c2c ? ? - - - 0"; }

# ptrace_scope decides whether a process may read a peer's memory (process_vm_readv:
# Open MPI's vader CMA, UCX's cma transport, cohort's single copy); no file = no Yama LSM.
ptrace_scope() {
    if [ -r /proc/sys/kernel/yama/ptrace_scope ]; then cat /proc/sys/kernel/yama/ptrace_scope
    else echo "absent (no Yama LSM: same-uid processes may read each other)"; fi
}
PTRACE_SCOPE=$(ptrace_scope)

{
    echo "# date: $(date -Is)"
    echo "# host: $(hostname)  kernel: $(uname -r)  debian: $(cat /etc/debian_version 2>/dev/null)"
    echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc)  mem: $(free -g | awk '/Mem:/{print $2}') GiB"
    echo "# cohort: $(git -C "$ROOT" describe --always --dirty 2>/dev/null)  perf: $PERF"
    echo "# uid: $(id -u)  kernel.yama.ptrace_scope: $PTRACE_SCOPE"
    # TCP: the system's congestion control is what Open MPI's and Gloo's sockets run;
    # cohort's own choice per connection is in its "copy: tcp sockets (...)" lines
    echo "# tcp: net.ipv4.tcp_congestion_control=$(sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null)  allowed: $(sysctl -n net.ipv4.tcp_allowed_congestion_control 2>/dev/null)  tcp_rmem: $(sysctl -n net.ipv4.tcp_rmem 2>/dev/null | tr '\t' ' ')  tcp_wmem: $(sysctl -n net.ipv4.tcp_wmem 2>/dev/null | tr '\t' ' ')  COHORT_TCP_CONGESTION=${COHORT_TCP_CONGESTION:-unset}"
    echo "# open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
    echo "# open mpi: $(ompi_info --param btl vader --level 9 2>/dev/null | grep -o 'btl_vader_single_copy_mechanism" (current value: "[a-z]*", data source: [a-z]*' | tr -d '"')"
    echo "# open mpi: system MCA params: $(grep -v '^#' /etc/openmpi/openmpi-mca-params.conf 2>/dev/null | grep -v '^$' | paste -sd' ')"
    echo "# open mpi: OMPI_MCA_* in the environment: $(env | grep '^OMPI_MCA_' | paste -sd' ')"
    echo "# mpich: $(mpichversion 2>/dev/null | head -1 | tr -s '\t ' ' ')  device: $(mpichversion 2>/dev/null | sed -n 's/^MPICH Device: *//p' | tr -d '\t')"
    echo "# mpich: ucx $(ucx_info -v 2>/dev/null | sed -n 's/.*Library version: *//p')  MPIR_CVAR_*/UCX_* in the environment: $(env | grep -E '^(MPIR_CVAR_|UCX_)' | paste -sd' ')"
    echo "# torch: $($PY -c 'import torch; print(torch.__version__)')"
    echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)  (the machine may be shared: ratios of interleaved launches, not absolutes)"
    echo "# PRESET=${PRESET:-none} REPS=$REPS T=$T QUICK=$QUICK NICE=$NICE CONFIGS=$CONFIGS BIND=${BIND:-default} (cohort launches)"
    echo "# SIZES=$SIZES"
    echo "# OPS=${OPS:-default}: cohort $COHORT_OPS; mpi_coll_bench ${MPI_OPS:--}; mpi_coll_ext ${EXT_OPS:--}; gloo ${GLOO_OPS:--}$([ "${GLOO:-1}" = 1 ] || echo " (GLOO=0: not in shm2)")"
    echo "# command: $0 $*"
    if [ "${QUICK:-0}" = 0 ]; then # the floors of this machine now (two cores, nothing else)
        echo "# floor: $("$PEERS/bin/slot_floor" 4096 8 2>&1)"
        "$PEERS/bin/ring_stride" 0 1 300000 2>&1 |
            grep -E '^c2c round trip p50 [0-9]+ ns \(|stride +(16|128) B.*(none|producer)' |
            sed 's/^/# floor: ring_stride: /'
    fi
} > "$OUT/run_info.txt"
cat "$OUT/run_info.txt" >&2

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# busy_pct: share of CPU time the machine spent busy over the last second
# (everything else: this script is idle while it samples).
busy_pct() {

    read -r _ a1 a2 a3 a4 a5 a6 a7 a8 _ < /proc/stat
    sleep 1
    read -r _ b1 b2 b3 b4 b5 b6 b7 b8 _ < /proc/stat
    local idle=$(( (b4 + b5) - (a4 + a5) ))
    local total=$(( (b1+b2+b3+b4+b5+b6+b7+b8) - (a1+a2+a3+a4+a5+a6+a7+a8) ))
    [ $total -gt 0 ] && echo $(( 100 * (total - idle) / total )) || echo 0
}

# wait_quiet: the machine is shared; before a launch wait (at most QUIET_WAIT
# seconds) until other work leaves the CPUs under QUIET_BUSY percent busy, and
# say what the launch got. Noise is still there: that is why medians are taken.
QUIET_BUSY=${QUIET_BUSY:-20}
QUIET_WAIT=${QUIET_WAIT:-120}
LAST_BUSY=0
wait_quiet() {
    local t0=$SECONDS
    LAST_BUSY=$(busy_pct)
    while [ "$LAST_BUSY" -ge "$QUIET_BUSY" ] && [ $((SECONDS - t0)) -lt "$QUIET_WAIT" ]; do
        LAST_BUSY=$(busy_pct)
    done
    [ "$LAST_BUSY" -ge "$QUIET_BUSY" ] && log "   machine still ${LAST_BUSY}% busy after ${QUIET_WAIT}s: launching anyway"
}

# launch FILE CMD...: starts CMD in the background (see stop_launches), its
# output appended to FILE; its pid is the last of LAUNCHED.
launch() {
    local f=$1; shift
    nice -n "$NICE" timeout -k 10 "$LAUNCH_TIMEOUT" "$@" >> "$f" 2>&1 &
    LAUNCHED+=($!)
}
# reap PID: waits for a launch and returns its exit code.
reap() {
    local p=$1 rc=0 q keep=()
    wait "$p" || rc=$?
    for q in "${LAUNCHED[@]}"; do [ "$q" = "$p" ] || keep+=("$q"); done
    LAUNCHED=("${keep[@]}")
    return $rc
}

# runlog FILE CMD... : one launch, output to FILE with a header; never aborts the run.
runlog() {
    local f=$1; shift
    mkdir -p "$(dirname "$f")"
    wait_quiet
    { echo "# cmd: $*"; echo "# date: $(date -Is)  load: $(cut -d' ' -f1-3 /proc/loadavg)  busy before: ${LAST_BUSY}%"
      echo "# kernel: $(uname -r)  ptrace_scope: $PTRACE_SCOPE"
      echo "# c2c before: $(c2c_now)"; } > "$f"
    CURRENT=$f
    launch "$f" "$@"
    local rc=0
    reap "${LAUNCHED[-1]}" || rc=$?
    CURRENT=""
    echo "# after: $(date -Is)  load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$f"
    echo "# c2c after: $(c2c_now)" >> "$f"
    if [ $rc -ne 0 ]; then
        echo "# exit code $rc" >> "$f"
        log "   !! $(basename "$(dirname "$f")")/$(basename "$f") exited $rc"
    fi
    return 0
}

# ---- one launch per library -----------------------------------------------

osu_flag() { [[ $1 == *osu ]] && echo "$2"; return 0; } # cfg flag: the flag in OSU configs
bind_flag() { [ -n "${BIND:-}" ] && echo "--bind $BIND"; return 0; }
# netns: cohort-perf --bind numbers cores by local rank, 0 on both namespace "hosts", so
# core/auto bind rank i to core i by taskset instead, while the ranks fit the cores.
netns_bind() { # CFG I N
    case "${BIND:-}" in core | auto) [ "$3" -le "$(nproc)" ] && echo "taskset -c $2" ;; esac
    return 0
}

cohort() { # cfg rep lib nranks [cohort-perf args...]
    local cfg=$1 rep=$2 lib=$3 n=$4; shift 4
    local base="$OUT/raw/$cfg/$lib.$rep"
    runlog "$base.txt" ${PERF_PRELOAD:+env LD_PRELOAD="$PERF_PRELOAD"} "$PERF" --np "$n" --coll $COHORT_OPS --sizes "$SIZES" --time "$T" \
        --in-place no --memory --sched --deadline "$LAUNCH_TIMEOUT" --json-out "$base.json" \
        $(osu_flag "$cfg" --osu) $(bind_flag "$cfg") -l "$cfg $lib" "$@"
}
# An MPI peer's launch is one mpirun of mpi_coll_bench for the ops it has ($MPI_OPS,
# <lib>.<rep>.txt) and, when OPS names any of all_to_all/gather/scatter/reduce, one of
# mpi_coll_ext for those ($EXT_OPS, <lib>.<rep>.ext.txt), back to back in the same
# slot of the round (summarize.py reads both files as launch <rep> of <lib>).
# mpi_peer KIND FILE_BASE CFG LAUNCHER...: KIND openmpi|mpich; LAUNCHER ends before the binary.
mpi_peer() {
    local kind=$1 base=$2 cfg=$3; shift 3
    local label="$cfg ${base##*/}"; label=${label%.*}
    if [ -n "$MPI_OPS" ]; then
        runlog "$base.txt" "$@" "$PEERS/bin/mpi_coll_bench.$kind" \
            -c $MPI_OPS -s "$SIZES" -t "$T" $(osu_flag "$cfg" -o) -l "$label"
    fi
    if [ -n "$EXT_OPS" ]; then
        runlog "$base.ext.txt" "$@" "$PEERS/bin/mpi_coll_ext.$kind" \
            -c $EXT_OPS -s "$SIZES" -t "$T" $(osu_flag "$cfg" -o) -l "$label"
    fi
}
ompi() { # cfg rep lib nranks [mpirun args...]
    local cfg=$1 rep=$2 lib=$3 n=$4; shift 4
    mpi_peer openmpi "$OUT/raw/$cfg/$lib.$rep" "$cfg" $OMPI $OMPI_VERBOSE -n "$n" "$@"
}
mpich() {
    local cfg=$1 rep=$2 lib=$3 n=$4; shift 4
    # UCX_LOG_LEVEL=info: UCX names the transports of each endpoint (init only)
    mpi_peer mpich "$OUT/raw/$cfg/$lib.$rep" "$cfg" env UCX_LOG_LEVEL=info $MPICH -n "$n" "$@"
}
gloo() {
    local cfg=$1 rep=$2 lib=$3 n=$4; shift 4
    runlog "$OUT/raw/$cfg/$lib.$rep.txt" $PY "$PEERS/gloo_bench.py" -n "$n" -c $GLOO_OPS \
        -s "$SIZES" -t "$T" --port "$(free_port)" -l "$cfg $lib"
}

# ---- network namespaces: two "hosts" joined by a veth pair ----------------

NS_IP_A=10.231.0.1 NS_IP_B=10.231.0.2
netns_up() {
    NS_A=cohcmpA$$ NS_B=cohcmpB$$
    local va=ccv0$$ vb=ccv1$$
    . "$HERE/../../tests/support/netns_stale.sh"
    netns_stale cohcmpA cohcmpB ccv0 ccv1 # a killed run's namespaces and veths
    ip netns add $NS_A && ip netns add $NS_B || return 1
    ip link add $va type veth peer name $vb || return 1
    ip link set $va netns $NS_A && ip link set $vb netns $NS_B || return 1
    # Same interface name on both sides, like two hosts' eth0.
    ip -n $NS_A link set $va name coh0 && ip -n $NS_B link set $vb name coh0 || return 1
    ip -n $NS_A addr add $NS_IP_A/24 dev coh0 && ip -n $NS_B addr add $NS_IP_B/24 dev coh0 || return 1
    for ns in $NS_A $NS_B; do
        ip -n $ns link set lo up && ip -n $ns link set coh0 up || return 1
    done
    # Open MPI's launch agent for the two "hosts": mpirun (in NS_A) would ssh to
    # NS_IP_B to start its daemon there; this runs the daemon in NS_B instead.
    {
        echo '#!/bin/sh'
        echo '# ns_rsh [OPTIONS] HOST CMD...: plm_rsh_agent for bench/compare namespaces'
        echo 'while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done'
        echo 'host=$1; shift'
        echo "case \$host in $NS_IP_A) ns=$NS_A ;; $NS_IP_B) ns=$NS_B ;;"
        echo '*) echo "ns_rsh: unknown host $host" >&2; exit 1 ;; esac'
        echo 'exec ip netns exec $ns /bin/sh -c "$*"'
    } > "$PEERS/bin/ns_rsh" && chmod +x "$PEERS/bin/ns_rsh"
}

# ns_of I N: the namespace of rank I of N (the first half in A, the rest in B)
ns_of() { if [ "$1" -lt $(($2 / 2)) ]; then echo "$NS_A"; else echo "$NS_B"; fi; }

# cohort_netns CFG K N: cohort with --transport tcp, ranks half and half over the
# two namespaces, started by hand (RANK/WORLD_SIZE/MASTER_ADDR, as a launcher would).
cohort_netns() {
    local cfg=$1 rep=$2 n=$3 base="$OUT/raw/$1/cohort.$2" port=$((20000 + RANDOM % 20000))
    mkdir -p "$OUT/raw/$cfg"
    local tok; tok=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    local common=(WORLD_SIZE=$n MASTER_ADDR=$NS_IP_A MASTER_PORT=$port COHORT_JOB_ID=cmp$$-$cfg-$rep
                  COHORT_TOKEN=$tok LOCAL_WORLD_SIZE=$((n / 2)))
    local args=(--transport tcp --coll $COHORT_OPS --sizes "$SIZES" --time "$T" --in-place no
                --deadline "$LAUNCH_TIMEOUT" $(osu_flag "$cfg" --osu) -l "$cfg cohort")
    wait_quiet
    { echo "# cmd: ip netns exec A|B $PERF ${args[*]} (ranks 0..$((n / 2 - 1)) in $NS_A $NS_IP_A, the rest in $NS_B $NS_IP_B)"
      echo "# date: $(date -Is)  load: $(cut -d' ' -f1-3 /proc/loadavg)  busy before: ${LAST_BUSY}%"
      echo "# kernel: $(uname -r)  ptrace_scope: $PTRACE_SCOPE"
      echo "# c2c before: $(c2c_now)"; } > "$base.txt"
    CURRENT=$base.txt
    local pids=() i
    for i in $(seq 1 $((n - 1))); do
        : > "$base.rank$i.txt"
        launch "$base.rank$i.txt" ip netns exec "$(ns_of $i $n)" env "${common[@]}" \
            RANK=$i LOCAL_RANK=$((i % (n / 2))) $(netns_bind "$cfg" $i $n) "$PERF" "${args[@]}"
        pids+=("${LAUNCHED[-1]}")
    done
    launch "$base.txt" ip netns exec "$NS_A" env "${common[@]}" RANK=0 LOCAL_RANK=0 \
        $(netns_bind "$cfg" 0 $n) "$PERF" "${args[@]}" --json-out "$base.json"
    local rc=0 rcs
    reap "${LAUNCHED[-1]}" || rc=$?
    rcs=$rc
    for i in "${!pids[@]}"; do
        local r=0
        reap "${pids[$i]}" || r=$?
        rcs="$rcs $r"
        [ $r -ne 0 ] && rc=$r
        cat "$base.rank$((i + 1)).txt" >> "$base.txt"
        rm -f "$base.rank$((i + 1)).txt"
    done
    echo "# after: $(date -Is)  load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$base.txt"
    echo "# c2c after: $(c2c_now)" >> "$base.txt"
    CURRENT=""
    if [ $rc -ne 0 ]; then echo "# exit codes $rcs" >> "$base.txt"; log "   !! $cfg/cohort.$rep exited $rcs"; fi
    return 0
}
netns_next() { # CFG N: the next numbered cohort launch of a netns configuration
    local k=$(( ${NEXT[$1.cohort]:-0} + 1 ))
    NEXT[$1.cohort]=$k
    cohort_netns "$1" "$k" "$2"
}

# ompi_netns CFG REP N: mpirun in NS_A, its daemon in NS_B (ns_rsh), TCP on the veth
# for both its out-of-band channel and the btl, half the ranks on each "host".
# Binding as mpirun binds on one host: left to itself, each "host's" daemon binds
# its own first rank to core 0, so ranks of both namespaces would share one core
# (seen: 2 ranks both "bound to socket 0[core 0]"). With no more ranks than cores,
# a rankfile puts rank i on core i, as Open MPI's tcp2 launches get; with more
# (oversubscribed), no binding, as Open MPI does on one host.
ompi_netns() {
    local cfg=$1 rep=$2 n=$3 bind=(--bind-to none) i
    if [ "$n" -le "$(nproc)" ]; then
        for i in $(seq 0 $((n - 1))); do
            echo "rank $i=$([ "$(ns_of $i $n)" = "$NS_A" ] && echo $NS_IP_A || echo $NS_IP_B) slot=$i"
        done > "$PEERS/bin/rankfile.$n"
        bind=(--rankfile "$PEERS/bin/rankfile.$n")
    fi
    mpi_peer openmpi "$OUT/raw/$cfg/ompi.$rep" "$cfg" ip netns exec "$NS_A" $OMPI $OMPI_VERBOSE \
        --host $NS_IP_A:$((n / 2)),$NS_IP_B:$((n / 2)) -n "$n" "${bind[@]}" \
        --mca plm_rsh_agent "$PEERS/bin/ns_rsh" --mca oob_tcp_if_include coh0 \
        --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include coh0
}

gloo_netns() { # CFG REP N
    local cfg=$1 rep=$2 n=$3 base="$OUT/raw/$1/gloo.$2" port=$((20000 + RANDOM % 20000))
    mkdir -p "$OUT/raw/$cfg"
    local common=(WORLD_SIZE=$n MASTER_ADDR=$NS_IP_A MASTER_PORT=$port GLOO_SOCKET_IFNAME=coh0 OMP_NUM_THREADS=1)
    local args=(--worker -n "$n" -c $GLOO_OPS -s "$SIZES" -t "$T" -l "$cfg gloo")
    wait_quiet
    { echo "# cmd: ip netns exec A|B $PY gloo_bench.py ${args[*]} (ranks half and half)"
      echo "# date: $(date -Is)  load: $(cut -d' ' -f1-3 /proc/loadavg)  busy before: ${LAST_BUSY}%"
      echo "# c2c before: $(c2c_now)"; } > "$base.txt"
    CURRENT=$base.txt
    local pids=() i
    for i in $(seq 1 $((n - 1))); do
        launch /dev/null ip netns exec "$(ns_of $i $n)" env "${common[@]}" \
            RANK=$i LOCAL_RANK=$((i % (n / 2))) $PY "$PEERS/gloo_bench.py" "${args[@]}"
        pids+=("${LAUNCHED[-1]}")
    done
    launch "$base.txt" ip netns exec "$NS_A" env "${common[@]}" RANK=0 LOCAL_RANK=0 \
        $PY "$PEERS/gloo_bench.py" "${args[@]}"
    reap "${LAUNCHED[-1]}" || log "   !! $cfg/gloo.$rep failed"
    for i in "${!pids[@]}"; do reap "${pids[$i]}"; done
    CURRENT=""
    echo "# after: $(date -Is)  load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$base.txt"
    echo "# c2c after: $(c2c_now)" >> "$base.txt"
    return 0
}

# ---- the configurations ----------------------------------------------------

has() { [[ " $CONFIGS " == *" $1 "* ]]; }

# cohort runs before each peer (cohort, peer, cohort, peer, ...), so it gets
# one launch per peer per round; files are numbered per configuration.
declare -A NEXT
cohort_next() { # cfg lib nranks args... : the next numbered cohort launch
    local cfg=$1 lib=$2; shift 2
    local k=$(( ${NEXT[$cfg.$lib]:-0} + 1 ))
    NEXT[$cfg.$lib]=$k
    cohort "$cfg" "$k" "$lib" "$@"
}

for rep in $(seq 1 "$REPS"); do
    log "round $rep of $REPS"
    if has shm2; then
        log " shm2"
        cohort_next shm2 cohort 2; ompi shm2 $rep ompi 2
        cohort_next shm2 cohort 2; mpich shm2 $rep mpich 2
        [ "${GLOO:-1}" = 1 ] && { cohort_next shm2 cohort 2; gloo shm2 $rep gloo 2; }
    fi
    if has memcpy; then
        runlog "$OUT/raw/memcpy/memcpy.$rep.txt" "$PEERS/bin/memcpy_floor" 1048576 2000
    fi
    # the same program with its buffers from the shared heap (cohortrun --heap):
    # cohort alone, the target being one memcpy (issue #14's 1.3x)
    for cfg in shm2heap shm2heaposu; do
        if has $cfg; then
            log " $cfg"
            PERF_PRELOAD=$HEAP_LIB cohort_next $cfg cohort 2
        fi
    done
    if has shm2osu; then
        log " shm2osu"
        cohort_next shm2osu cohort 2; ompi shm2osu $rep ompi 2
        cohort_next shm2osu cohort 2; mpich shm2osu $rep mpich 2
    fi
    for n in 4 8 16; do
        for cfg in over$n over${n}osu; do
            if has $cfg; then
                log " $cfg"
                cohort_next $cfg cohort $n; ompi $cfg $rep ompi $n
                # MPICH at 4 and 8: the shm target there is against the best of the MPIs.
                # Not OSU style unless MPICH_OVER_OSU=1: there its busy-polling ranks take
                # minutes a launch (over4osu 5 min, over8osu > 14 min on 2026-12-02, quiet)
                # and Open MPI was the better peer in every such cell measured.
                if [ $n -le 8 ] && { [ "$cfg" = over$n ] || [ "${MPICH_OVER_OSU:-0}" = 1 ]; }; then
                    cohort_next $cfg cohort $n; mpich $cfg $rep mpich $n
                fi
            fi
        done
    done
    for n in 2 4; do
        for cfg in tcp$n tcp${n}osu; do
            if has $cfg; then
                log " $cfg"
                cohort_next $cfg cohort $n --transport tcp; ompi $cfg $rep ompi $n $OMPI_TCP
                # Gloo has no OSU mode, nor any of OPS=all_to_all,gather,scatter,reduce
                if [[ $cfg != *osu ]] && [ -n "$GLOO_OPS" ]; then cohort_next $cfg cohort $n --transport tcp; gloo $cfg $rep gloo $n; fi
            fi
        done
    done
    for cfg in netns2 netns2osu netns4 netns4osu; do
        has $cfg || continue
        if [ -z "$NS_A" ] && ! netns_up; then
            log " $cfg: cannot create network namespaces (needs root and ip netns); netns configurations skipped"
            CONFIGS=$(echo " $CONFIGS " | sed -E 's/ netns[0-9a-z]+//g')
            break
        fi
        n=${cfg#netns}; n=${n%osu}
        log " $cfg"
        # cohort before each peer, numbered per configuration, as elsewhere
        netns_next $cfg $n; ompi_netns $cfg $rep $n
        if [[ $cfg != *osu ]] && [ -n "$GLOO_OPS" ]; then netns_next $cfg $n; gloo_netns $cfg $rep $n; fi
    done
    if has contract; then
        log " contract"
        # Alternate which goes first, so neither always runs on a cooler machine.
        if [ $((rep % 2)) = 1 ]; then
            cohort contract $rep on 2; cohort contract $rep off 2 --contract off
        else
            cohort contract $rep off 2 --contract off; cohort contract $rep on 2
        fi
    fi
done

if has memory; then
    log "memory"
    for n in 2 4 8; do
        for rep in $(seq 1 $(( REPS < 3 ? REPS : 3 ))); do
            base="$OUT/raw/memory/cohort.n$n.$rep"
            runlog "$base.txt" "$PERF" --np $n --coll all_reduce --sizes "$(echo "$SIZES" | tr , '\n' | awk -v m=$MEMMAX '$1<=m' | paste -sd,)" \
                -n 20 -w 2 --in-place no --memory --json-out "$base.json"
            runlog "$OUT/raw/memory/ompi.n$n.$rep.txt" $OMPI -n $n "$PEERS/bin/mpi_mem.openmpi" $MEMMAX 20
        done
    done
fi

log "summarizing into $OUT"
$PY "$HERE/summarize.py" "$OUT" || die "summarize.py failed"
if [ -f "$OUT/plots/plots.gp" ]; then
    (cd "$OUT/plots" && gnuplot plots.gp) || log "gnuplot failed"
fi
log "done: $OUT/compare.md"
cat "$OUT/compare.md"
}
main "$@"
